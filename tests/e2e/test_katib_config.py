"""Scenario f: ``katib-progress katib-config merge`` and ``remove`` on Katib's real ConfigMap.

The session's cluster was set up the documented way (docs/deploy.md step 3): Katib's standalone
katib-config stored as ConfigMap ``kubeflow/katib-config``, then ``kubectl get -o yaml | katib-progress
katib-config merge | kubectl apply``. Katib's controller then serves ``kp-*`` Experiments from it
(scenarios a-e); its webhook refuses an algorithm katib-config does not list. ``remove`` restores the
original text byte for byte, and the webhook refuses ``kp-tpe`` again.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e import katib as install
from tests.e2e.cluster import RealKatib
from tests.katibmodel.scenarios import experiment


def test_merge_then_remove_restores_katib_config_byte_for_byte(katib: RealKatib) -> None:
    merged = install.config_data(katib.kube)
    assert "kp-tpe" in merged and "katib-progress" in merged
    assert merged != katib.stock_config

    removed, advice = install.katib_config_command("remove", install.configmap_yaml(katib.kube))
    install.apply_configmap(katib.kube, removed)
    try:
        assert install.config_data(katib.kube) == katib.stock_config
        assert "katib-config" in advice
        # Katib's validating webhook reads the live runtime section: kp-tpe is unknown now
        with pytest.raises(client.ApiException) as refused:
            katib.submit(experiment("cfg-removed", max_trials=1, parallel=1))
        assert refused.value.status == 400
        assert "kp-tpe" in str(refused.value.body)
    finally:
        again, _ = install.katib_config_command("merge", install.configmap_yaml(katib.kube))
        install.apply_configmap(katib.kube, again)
    assert install.config_data(katib.kube) == merged
