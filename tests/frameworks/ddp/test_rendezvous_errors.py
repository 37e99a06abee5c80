"""The bounded waits of the rendezvous through torch.distributed's store
(threelc.torch._torchrun): a key that never appears fails within THREELC_START_TIMEOUT, naming
the keys still missing and not the ones that came."""

from __future__ import annotations

import datetime

import pytest
import torch.distributed as dist

import threelc.torch as hvd
from threelc.torch import _torchrun


def test_a_wait_names_only_the_keys_that_did_not_appear(monkeypatch):
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30))
    store.set("threelc/host/0", "a")
    store.set("threelc/host/2", "c")
    keys = [f"threelc/host/{r}" for r in range(4)]
    monkeypatch.setenv("THREELC_START_TIMEOUT", "1")
    with pytest.raises(hvd.ThreelcError) as raised:
        _torchrun._wait_for(store, keys, 0)
    message = str(raised.value)
    assert "threelc/host/1, threelc/host/3 did not appear" in message, message
    assert "host/0" not in message and "host/2" not in message, message
    assert "THREELC_START_TIMEOUT (1.0 s" in message, message
