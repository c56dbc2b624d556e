"""The end-to-end tier: Katib's own controllers, DB manager and Go suggestion service against a real
kube-apiserver and etcd (built from Go modules by scripts/e2e_build.sh). See docs/cluster.md."""
