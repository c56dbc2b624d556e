#!/usr/bin/env bash
# Regenerate the Python stubs of katib-progress's own protos (the pruning API).
#
# The proto is compiled with the repository root as include path, so the generated modules import
# each other as `suggestion.pruning.proto.katib_progress.pruning.v1.pruning_pb2`: that resolves both
# from a checkout and from the installed wheel. The proto *package* stays katib_progress.pruning.v1,
# so the gRPC service name is /katib_progress.pruning.v1.Pruning/.
# Needs grpcio-tools (a dev dependency), whose protobuf runtime must match the pinned protobuf.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
PROTO=suggestion/pruning/proto/katib_progress/pruning/v1/pruning.proto
INCLUDE="$("$PY" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"
"$PY" -m grpc_tools.protoc -I . -I "$INCLUDE" \
  --python_out=. --pyi_out=. --grpc_python_out=. "$PROTO"
echo "generated: $(ls "$(dirname "$PROTO")"/*_pb2*)"
