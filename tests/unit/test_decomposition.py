"""wotbench.analysis.decomposition: R − S split by place, from kernel and user-space stamps."""
import numpy as np
import pandas as pd
import pytest

from wotbench.analysis import decomposition as decomp


def _frames(kernel_ge=True, kernel_dev=True, dev_sent=True):
    """Two answered requests and one timeout, stamps in ns from the test start (µs apart so the
    expected parts are easy to read)."""
    us = 1e3
    req = pd.DataFrame({
        "sent": [0.0, 1000 * us, 2000 * us],
        "recv_user": [1090 * us, 2160 * us, np.nan],
        "recv_kernel": [1070 * us if kernel_ge else np.nan, 2150 * us if kernel_ge else np.nan,
                        np.nan],
        "outcome": ["ok", "ok", "timeout"],
    })
    req["recv"] = np.where(np.isnan(req["recv_kernel"]), req["recv_user"], req["recv_kernel"])
    matched = pd.DataFrame({
        "row": [0, 1, 2], "code": [0, 1, 1],
        "arrival_k": [10 * us, 1012 * us, 2010 * us] if kernel_dev else [np.nan] * 3,
        "arrival": [25 * us, 1030 * us, 2020 * us],          # read by the handler
        "start": [40 * us, 1050 * us, 2030 * us],
        "end": [1041 * us, 2052 * us, np.nan],
        "dev_sent": [1050 * us, 2060 * us, np.nan] if dev_sent else [np.nan] * 3,
    })
    s_ms = np.array([1.0, 1.0, 1.0])
    return req, matched, s_ms


def test_kernel_stamps_split_exactly():
    f = decomp.split(*_frames())
    assert list(f["row"]) == [0, 1]             # the timeout has no R
    assert f["kernel"].all()
    a, b = f.iloc[0], f.iloc[1]
    assert a["r_minus_s"] == pytest.approx(70)   # 1070 - 0 - 1000
    assert a["network_out"] == pytest.approx(10) and a["network_back"] == pytest.approx(20)
    assert a["device_in"] == pytest.approx(30) and a["device_out"] == pytest.approx(9)
    assert a["service"] == pytest.approx(1) and a["ge_side"] == pytest.approx(20)
    assert b["r_minus_s"] == pytest.approx(150) and b["ge_side"] == pytest.approx(10)
    for _, r in f.iterrows():   # the parts add up to R − S
        assert r["network"] + r["device"] + r["service"] == pytest.approx(r["r_minus_s"])
        assert r["network"] == pytest.approx(r["network_out"] + r["network_back"])
        assert r["device"] == pytest.approx(r["device_in"] + r["device_out"])


def test_user_stamps_fall_back_and_still_add_up():
    f = decomp.split(*_frames(kernel_ge=False, kernel_dev=False, dev_sent=False))
    assert not f["kernel"].any()
    a = f.iloc[0]
    assert a["r_minus_s"] == pytest.approx(90)            # R ends at the user-space read
    assert a["network_out"] == pytest.approx(25)          # handler read stands in for arrival
    assert a["device_in"] == pytest.approx(15)
    assert np.isnan(a["device_out"]) and np.isnan(a["ge_side"])
    assert a["network_back"] == pytest.approx(1090 - 1041)  # hand-back counted as network
    assert a["network"] + a["device"] + a["service"] == pytest.approx(a["r_minus_s"])


def test_blocks_per_device_and_cd_phases():
    f = decomp.split(*_frames())
    block = decomp.split_block(f, ["d0", "d1"])
    assert block.overall.stamps == "kernel"
    assert block.overall.r_minus_s.count == 2
    assert block.overall.r_minus_s.mean_us == pytest.approx(110)
    assert block.per_device["d0"].device_in.p50_us == pytest.approx(30)
    assert block.per_device["d1"].ge_side.max_us == pytest.approx(10)
    cd = decomp.cd_block(f, np.array(["calibration", "test"]))
    assert cd.calibration.r_minus_s.p50_us == pytest.approx(70)
    assert cd.test.network_back.p50_us == pytest.approx(2150 - 2060)
    mixed = decomp.split(*_frames(kernel_dev=False))
    assert decomp.split_block(mixed, ["d0", "d1"]).overall.stamps == "user"
    empty = decomp.split_block(f.iloc[:0], ["d0"])
    assert empty.overall.stamps == "none" and empty.per_device == {}
