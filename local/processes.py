"""The local stack's processes: none outlives the `python -m local` that started it.

The parent starts moto's server and the functions' worker processes (`local.function_workers`). A parent that
stops cleanly stops them; a parent that crashes or is killed (SIGKILL gives it no chance to) cannot, so every
child watches its own parent and exits when it is gone: an orphan is re-parented, so its parent's pid changes.
That works the same on Linux and macOS, and needs nothing of the parent (a process group would need the
parent to signal it, which a killed parent cannot do).
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType

WATCH_EVERY_SECONDS = 0.2
SIGNAL_POLL_SECONDS = 0.2


def exit_with_parent() -> None:
    """In a child: exit as soon as the process that started it is gone (checked on a daemon thread)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(WATCH_EVERY_SECONDS)
        os._exit(1)  # no clean-up to wait for: the parent, which owned the state, is gone

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def keep_what_is_loaded() -> None:
    """Call once a process has loaded what it keeps for its life (modules, AWS service models, the handlers): those
    objects are moved out of the cyclic collector's reach (`gc.freeze`), so that its full collections walk only
    what was made since. In the functions' fork server it also keeps a forked worker from copying the pages the
    collector would write to. Frozen objects are still freed by reference counting; only cycles among them are
    never collected."""
    gc.collect()
    gc.freeze()


def keep_what_survives() -> None:
    """For moto's servers, whose state only grows (moto keeps every item, message and execution it is given): what
    was loaded, and then whatever survives each full collection, is frozen, so that a full collection walks only
    what was made since the last one. Without it each full collection walked every object the server held, some
    180,000 at its start and growing with every item: 110-140 ms, measured with `gc.callbacks` while the
    isolation benchmark ran (bench/isolation.py), in which the server answers nothing (DynamoDB's serves one
    request at a time), and those were the benchmark's slowest deliveries. A cycle that became garbage after it
    was frozen is never collected; moto gives none of its state back anyway."""
    keep_what_is_loaded()

    def freeze_survivors(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            gc.freeze()

    gc.callbacks.append(freeze_survivors)


def name_this_process(name: str) -> None:
    """Show `name` (up to 15 characters) for this process in `ps`, `top` and /proc/<pid>/comm (Linux), so a
    person watching the machine, and the throughput benchmark's CPU split, can tell the stack's processes apart:
    they are all `python` otherwise. Elsewhere it does nothing."""
    try:
        Path("/proc/self/comm").write_text(name[:15])
    except OSError:
        pass


def leave_interrupts_to_the_parent() -> None:
    """In a child: Ctrl-C reaches the whole terminal's process group; the parent decides how everything stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def wait_for_signal(*numbers: signal.Signals) -> int:
    """Block until the first of these signals arrives; its number.

    The handler only appends to a list and takes no lock. A Python signal handler runs in the main thread between two
    of its bytecodes, so a handler that set a threading.Event could be interrupted, holding the Event's lock, by the
    next signal's handler, whose `set` then waited for that lock forever. Ctrl-C, `make`'s forwarding and a
    supervisor's SIGTERM can come together: the local stack's stop hung that way once (a py-spy dump showed the two
    handlers, one inside the other)."""
    received: list[int] = []

    def on_signal(number: int, _frame: FrameType | None) -> None:
        received.append(number)

    for number in numbers:
        signal.signal(number, on_signal)
    while not received:
        time.sleep(SIGNAL_POLL_SECONDS)
    return received[0]
