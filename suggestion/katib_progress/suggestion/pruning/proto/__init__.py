"""Generated protobuf stubs (see scripts/gen_proto.sh)."""
