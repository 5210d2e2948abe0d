"""bench/connected_bench.py's span breakdown: an answered RPC's round trip cut at its stamps,
joined with its device's row by id (hand-written files; the smoke run checks the real ones)."""
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "connected_bench", Path(__file__).resolve().parents[2] / "bench" / "connected_bench.py")
cb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cb)

APP = ("app,id,device,sched_ns,send_ns,reply_ns,status,outcome,reply_read_ns,reply_stamp\n"
       "0,0-0,7,1000,1100,9100,201,ok,9150,kernel\n"        # the one joined and counted
       "0,0-1,7,500,600,700,201,ok,710,kernel\n"            # scheduled before after_ns
       "1,1-0,8,2000,2050,,0,timeout,,\n"                  # not answered
       "1,1-1,9,3000,3010,4000,201,ok,4001,kernel\n")      # its device wrote no reply row
DEV = ("device,id,arrival_ns,due_ns,end_ns,sent_ns,outcome,read_ns,arrival_stamp\n"
       "7,0-0,3100,5100,5400,5600,sent,3300,kernel\n"
       "7,0-1,620,650,660,670,sent,625,kernel\n"
       "8,1-0,2100,3100,3100,3200,sent,2200,kernel\n"
       "9,1-1,3500,4500,4500,4500,dropped,3600,kernel\n")


def test_each_span_of_an_answered_rpc_from_its_stamps(tmp_path):
    (tmp_path / "rpc-log.csv").write_text(APP)
    (tmp_path / "conn-log-0.csv").write_text(DEV)
    sp = cb.spans(tmp_path / "rpc-log.csv", [tmp_path / "conn-log-0.csv"], after_ns=1000)
    got = {k: v.tolist() for k, v in sp.items()}
    assert got == {"round_trip": [8000.0], "server_in": [2000.0], "service": [2000.0],
                   "engine": [500.0],    # timer lateness 300 + the reply's write 200
                   "server_out": [3500.0], "send_lag": [100.0], "engine_read": [200.0],
                   "app_read": [50.0],
                   "server_device_server": [2500.0],   # reply written − kernel arrival
                   "t_ns": [1100.0]}
    # the spans between the stamps add up to the round trip
    assert sum(sp[k][0] for k in ("server_in", "service", "engine", "server_out")) == \
        sp["round_trip"][0]


def test_an_engine_early_on_its_timer_adds_no_negative_lateness(tmp_path):
    (tmp_path / "rpc-log.csv").write_text(APP.splitlines()[0] + "\n0,0-0,7,0,100,900,201,ok,,\n")
    (tmp_path / "conn-log-0.csv").write_text(
        DEV.splitlines()[0] + "\n7,0-0,200,500,480,520,sent,,\n")
    sp = cb.spans(tmp_path / "rpc-log.csv", [tmp_path / "conn-log-0.csv"])
    assert sp["engine"].tolist() == [40.0]          # max(end - due, 0) + (sent - end)
    assert sp["engine_read"].tolist() == [0.0] and sp["app_read"].tolist() == [0.0]


def test_no_answered_rpc_gives_empty_spans_and_says_so(tmp_path, capsys):
    (tmp_path / "rpc-log.csv").write_text(APP.splitlines()[0] + "\n")
    (tmp_path / "conn-log-0.csv").write_text(DEV)
    sp = cb.spans(tmp_path / "rpc-log.csv", [tmp_path / "conn-log-0.csv"])
    assert all(len(v) == 0 for v in sp.values())
    cb.print_spans(sp)
    assert "no answered RPC joined with its device" in capsys.readouterr().out


def test_spans_of_a_directory_that_is_not_a_connected_run_are_refused(tmp_path, capsys):
    (tmp_path / "summary.json").write_text('{"run": {"test_start_mono_ns": 0}}')
    (tmp_path / "config.resolved.yaml").write_text("applications: {warmup_s: 1}\n")
    assert cb.run_spans(tmp_path) == 2
    assert "not a connected run" in capsys.readouterr().out


@pytest.mark.parametrize("rows", [1, 200])
def test_the_slowest_percent_line_names_every_span_share(tmp_path, capsys, rows):
    app = [APP.splitlines()[0]]
    dev = [DEV.splitlines()[0]]
    for i in range(rows):
        rt = 1000 + 10 * i
        app.append(f"0,0-{i},1,{i},{i},{i + rt},201,ok,{i + rt},kernel")
        dev.append(f"1,0-{i},{i + 100},{i + 600},{i + 600},{i + 650},sent,{i + 100},kernel")
    (tmp_path / "rpc-log.csv").write_text("\n".join(app) + "\n")
    (tmp_path / "conn-log-0.csv").write_text("\n".join(dev) + "\n")
    cb.print_spans(cb.spans(tmp_path / "rpc-log.csv", [tmp_path / "conn-log-0.csv"]))
    out = capsys.readouterr().out
    assert f"where the time goes ({rows} answered RPCs; ms)" in out
    line = next(x for x in out.splitlines() if x.startswith("  slowest 1 %"))
    shares = dict(part.rsplit(" ", 2)[:2] for part in line.split("): ", 1)[1].split(", "))
    assert set(shares) == {"server_in", "service", "engine", "server_out"}, line
    # the four spans between the stamps are the whole round trip of those RPCs
    assert sum(float(v) for v in shares.values()) == pytest.approx(100, abs=0.3), line
