"""summary.json connected.stamps (wotbench.connected.stamps): which receive stamp the
messages got, and the readers' own delay (read − kernel stamp) of the RPCs after the warm-up,
from hand-written engine and application files; files of a build without stamps give None."""
import pandas as pd
import pytest

from wotbench.connected.stamps import rx_stamps
from wotbench.rundir.connected_files import ConnStamps, ConnSummary, RpcSummary

WARM = 1_000


def _dev(rows):
    return pd.DataFrame(rows, columns=["device", "id", "arrival_ns", "due_ns", "end_ns",
                                       "sent_ns", "outcome", "read_ns", "arrival_stamp"])


def _app(rows):
    return pd.DataFrame(rows, columns=["id", "sched_ns", "send_ns", "reply_ns", "outcome",
                                       "reply_read_ns", "reply_stamp"])


# only the fields rx_stamps reads (model_construct: the other counts do not matter here)
ENGINES = [ConnSummary.model_construct(stamps=ConnStamps(kernel=5, user=1, sockets_refused=0,
                                                         pin_on=1)),
           ConnSummary.model_construct(stamps=ConnStamps(kernel=2, user=0, sockets_refused=0,
                                                         pin_on=1))]


def test_counts_and_read_lags_of_the_kernel_stamped_rpcs_after_the_warm_up():
    dev = _dev([(1, "0-1", 500, 600, 610, 620, "sent", 900_500, "kernel"),      # warm-up
                (1, "0-2", 2_000, 3_000, 3_010, 3_020, "sent", 42_000, "kernel"),
                (2, "0-3", 5_000, 6_000, 6_010, 6_020, "sent", 7_000, "kernel"),
                (2, "0-4", 9_000, 9_500, 9_600, 9_700, "sent", 9_000, "user"),
                (3, "0-5", 9_000, 9_500, 9_600, None, "lost_disconnect", 90_000, "kernel")])
    app = _app([("0-2", 1_500, 1_600, 4_000, "ok", 2_004_000, "kernel"),
                ("0-3", 1_800, 1_900, 7_000, "ok", 7_000, "user"),
                ("0-6", 500, 600, 800, "ok", 50_000_800, "kernel"),                # warm-up
                ("0-7", 2_000, 2_100, None, "timeout", None, None)])
    s = rx_stamps(ENGINES, dev, RpcSummary.model_construct(replies_kernel_stamped=2, replies_user_stamped=1), app,
                  WARM)
    assert (s.device_kernel, s.device_user, s.reply_kernel, s.reply_user) == (7, 1, 2, 1)
    # engines: 40 µs and 2 µs (the warm-up's and the unsent reply's rows are not RPCs measured)
    assert s.engine_read_lag.n == 2 and s.engine_read_lag.max_ms == pytest.approx(0.040)
    # applications: the one kernel-stamped ok reply after the warm-up, 2 ms late to be read
    assert s.app_read_lag.n == 1 and s.app_read_lag.p50_ms == pytest.approx(2.0)


def test_files_without_stamps_give_none_and_a_run_without_applications_has_no_app_lag():
    old = _dev([]).drop(columns=["read_ns", "arrival_stamp"])
    assert rx_stamps([ConnSummary.model_construct(stamps=None)], old, None, None, WARM) is None
    s = rx_stamps(ENGINES, _dev([]), None, None, WARM)
    assert s.reply_kernel == 0 and s.app_read_lag.n == 0 and s.engine_read_lag.n == 0


def test_a_merged_runs_device_rows_are_picked_by_the_rpcs_ids_not_by_their_own_clock():
    # a cell's device log on its own host's clock (10^12 ns ahead of the run's): the warm-up
    # is on the run's clock, so only the ids of the RPCs scheduled after it select the rows
    off = 10**12
    dev = _dev([(1, "0-1", off + 500, off + 600, off + 610, off + 620, "sent", off + 700,
                 "kernel"),                                                 # a warm-up RPC's
                (1, "0-2", off + 2_000, off + 3_000, off + 3_010, off + 3_020, "sent",
                 off + 12_000, "kernel")])
    app = _app([("0-1", 500, 600, 800, "ok", 900, "kernel"),
                ("0-2", 1_500, 1_600, 4_000, "ok", 4_100, "kernel")])
    s = rx_stamps(ENGINES, dev, None, app, WARM)
    assert s.engine_read_lag.n == 1 and s.engine_read_lag.max_ms == pytest.approx(0.010)
