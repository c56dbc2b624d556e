"""Stand-ins for stock Katib images (their upstream code cannot be copied or run here).

Each is a small process written from the upstream source it names, speaking Katib's real gRPC API
(``kubeflow.katib.katib_api_pb2``) on the port the upstream image binds.
"""
