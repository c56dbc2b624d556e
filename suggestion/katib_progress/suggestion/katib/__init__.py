"""Katib gRPC edge: converts ``api.v1.beta1`` protos to and from the plain domain types."""
