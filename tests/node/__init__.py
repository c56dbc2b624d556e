"""The real-node tier: a real single-node cluster (kubelet, containerd, runc, CNI, kube-proxy)."""
