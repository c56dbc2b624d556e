#!/usr/bin/env bash
# Regenerate the Python stubs of katib-progress's own proto (the pruning API).
#
# The proto is compiled with suggestion/ (the folder that holds the katib_progress.suggestion
# namespace portion) as include path, so the generated modules import each other as
# `katib_progress.suggestion.pruning.proto.pruning_pb2`, the same name in a checkout and in the wheel.
# The proto *package* stays katib_progress.pruning.v1, so the gRPC service name is
# /katib_progress.pruning.v1.Pruning/ (unchanged on the wire).
# Needs grpcio-tools (a dev dependency), whose protobuf runtime must match the pinned protobuf.
set -euo pipefail
cd "$(dirname "$0")/../suggestion"
PY="${PYTHON:-../.venv/bin/python}"
PROTO=katib_progress/suggestion/pruning/proto/pruning.proto
INCLUDE="$("$PY" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"
"$PY" -m grpc_tools.protoc -I . -I "$INCLUDE" \
  --python_out=. --pyi_out=. --grpc_python_out=. "$PROTO"
echo "generated: $(ls "$(dirname "$PROTO")"/*_pb2*)"
