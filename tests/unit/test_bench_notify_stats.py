"""testkit/notify_stats.py: the Observe benchmark's figures and its sustained rule."""

import numpy as np
import pandas as pd
import pytest

from testkit import notify_stats as ns

SALT, START = 0x0102030405060708, 1_000_000_000


def _step(**kw):
    base = dict(configured_per_s=1000, delivered_per_s=1000, received=2000, undelivered=0, late=0,
                interval_ns=1e6)
    return ns.Step(**{**base, **kw})


def test_judge_halves():
    assert ns.judge(_step()).sustained
    v = ns.judge(_step(delivered_per_s=960))                  # < 97 % of configured
    assert not v.delivered and not v.sustained and "delivered 960/s" in v.problems[0]
    assert ns.judge(_step(undelivered=20)).delivered          # 1 % of 2020: not shown to exceed
    v = ns.judge(_step(undelivered=60))
    assert not v.delivered and "60 of 2060 not delivered" in v.problems[0]
    v = ns.judge(_step(late=60))
    assert v.delivered and not v.on_time and not v.sustained


def test_late_is_relative_to_the_interval_with_a_1ms_floor():
    lat_us = np.array([500, 999, 1001, 3000, 9000])
    assert ns.late_count(lat_us, 100_000) == 3                  # 100 µs period: the 1 ms floor
    assert ns.late_count(lat_us, 5_000_000) == 1                # 5 ms period


def _device_frames(recv_seqs, emitted_seqs, kern=True):
    tok = ns.ge_token(SALT, 0)
    emit = {s: 100_000_000 * s for s in emitted_seqs}             # absolute ns
    log = pd.DataFrame({"emit_ns": list(emit.values()),
                        "tick_ns": [e - 50_000 for e in emit.values()],
                        "kind": "notify", "seq": list(emit), "token": tok})
    notes = pd.DataFrame({"observation": 0, "seq": recv_seqs,
                          "received_ns": [emit[s] - START + 900_000 for s in recv_seqs]})
    if kern:
        notes["received_kernel_ns"] = [emit[s] - START + 20_000 for s in recv_seqs]
    req = pd.DataFrame({"index": [0, 1], "method": ["OBSERVE", "CANCEL"], "path": ["o?o=0"] * 2,
                        "received_ns": [0, 0], "sent_ns": [0, 1_000_000_000]})
    return notes, log, req


def test_device_step_counts_gaps_tail_loss_and_uses_kernel_stamps():
    # emitted 1..8 (seq s at s x 100 ms); received 1, 2, 4, 5, 6: 3 is a gap; 7 and 8 came after
    # the last received one, long before the cancel (2.0 s): lost; 2 skipped reads x 1 observer
    notes, log, req = _device_frames([1, 2, 4, 5, 6], range(1, 9))
    s = ns.device_step(notes, log, req, SALT, START, 100e6, reads_skipped=2)
    assert s.received == 5 and s.undelivered == 1 + 2 + 2
    assert np.allclose(s.one_way_us, 20.0) and np.allclose(s.trigger_us, 70.0)
    assert s.configured_per_s == pytest.approx(10.0)
    assert s.delivered_per_s == pytest.approx(5 / 1.0)
    notes, log, req = _device_frames([1, 2], [1, 2], kern=False)   # an older GE: user-space reading
    assert np.allclose(ns.device_step(notes, log, req, SALT, START, 100e6).one_way_us, 900.0)


def test_probe_step_counts_each_put_observer_pair_once():
    rec = pd.DataFrame({"put": [0, 0, 1, 1, 2], "observer": [0, 1, 0, 0, 1],
                        "send_ns": [0, 0, 1000, 1000, 2000],
                        "recv_ns": [100_000, 200_000, 2_000_000, 2_000_000, 300_000]})
    s = ns.probe_step(rec, n_obs=2, rate=1000, puts=3)
    assert s.received == 4 and s.undelivered == 2 and s.configured_per_s == 2000
    assert s.late == 1                                            # 1999 µs > max(1 ms, 1 ms)
