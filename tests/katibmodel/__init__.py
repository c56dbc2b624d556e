"""A model of Katib's experiment, suggestion and trial controllers (and of Kubeflow Trainer and a
kubelet), run against the Kubernetes API stand-in, so that our real collector, suggestion and
early-stopping services and ``db serve`` are tested against Katib's controller logic.

Every rule names the upstream file and function it models; docs/katib-model.md lists them and
says what is not modelled. Entry point: ``harness.KatibModel``.
"""
