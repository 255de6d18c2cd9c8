"""Soak test (issue 36): a small run under random faults for a chosen wall time, checked after each.

    .venv/bin/python scripts/soak.py --minutes 60 --out runs/soak/final   (make soak)

`muzero train` (the default concurrent back end: a local Ray cluster with 2 self-play actors)
runs configs/tiny.yaml with a checkpoint every CHECKPOINT_INTERVAL steps, in segments: each
segment ends with a fault, and the next one resumes. The faults, at moments drawn from `--seed`:

* trainer SIGKILL: the driver killed while training, or now and then during start-up;
* full disk: the run folder's own tmpfs filled to a few pages or none (as root), else every
  write that grows a file failing (RLIMIT_FSIZE of the driver: "File too large"); the trainer
  must stop by itself with exit status 1 and one line, leaving no temporary behind;
* self-play worker SIGKILL: a `ray::SelfPlayWorker` process of the run, once per segment; the run
  must go on without a resume (Ray restarts the actor);
* corrupted newest checkpoint: after half of the stops, one file of the newest checkpoint is
  truncated or garbled; the resume must name it, fall back to the previous checkpoint and set the
  corrupted one aside whole.

After each fault: no complete checkpoint is lost but those `run.max_checkpoints` prunes; the
resume starts from the newest complete checkpoint (the previous one after a corruption), no more
than one checkpoint interval behind the last step logged (behind the corrupted checkpoint); it
holds at least the games the killed run had logged and its newest checkpoint had recorded (the
journal's promise); the resident memory of the trainer's process tree (driver, Ray's services and
workers), sampled every second, stays within the estimate on its first log line; no process of a
run outlives it. Prints the table of faults injected and survived; exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import functools
import hashlib
import os
import pickle
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from benchlib import markdown_table, resume_command, train_command, write_csv

from muzero.run_dir import complete_steps

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT_INTERVAL = 200
MAX_CHECKPOINTS = 3
SETTINGS = (
    "train.training_steps=1000000000",
    f"train.checkpoint_interval={CHECKPOINT_INTERVAL}",
    f"run.max_checkpoints={MAX_CHECKPOINTS}",
    "run.log_every_seconds=1",
    "run.grad_summary_interval=0",  # gradient histograms would make the event files most of the disk
    "actors.num_actors=2",
)
KINDS = {
    "trainer": "trainer SIGKILL",
    "worker": "self-play worker SIGKILL",
    "disk": "full disk",
    "corrupt": "corrupted newest checkpoint",
}
WAIT_SECONDS = 300.0  # the longest wait for the trainer to get somewhere (start-up on a busy machine)
EARLY_KILLS = 0.2  # share of trainer kills during start-up (TensorFlow, restore, Ray)
# Ray's agents (DashboardAgent, RuntimeEnvAgent) outlive a driver killed by SIGKILL by about a
# minute on this machine; a process of a run alive this long after it is a failure.
ORPHAN_SECONDS = 180.0
PAGE = os.sysconf("SC_PAGE_SIZE")
GIB = 1024**3

PROGRESS = re.compile(r"step (\d+)/\d+ .*?\| games (\d+) \|.*?actors (\d+) live")
RESUMED = re.compile(r"resumed from \S*ckpt-(\d+) at training step \d+ \((\d+) games")
MEMORY = re.compile(r"memory: up to ([\d.]+) GiB")
RESTARTED = re.compile(r"self-play actor \d+ [^\n]*; restarted")
STOPPED = re.compile(r"^muzero train: stopped: (.*)$", re.MULTILINE)


@dataclass
class Fault:
    """One fault injected, and what its checks found (`failures` empty: survived)."""

    kind: str
    segment: int
    detail: str
    failures: list[str] = field(default_factory=list)
    settled: bool = False  # its checks are done (the stop ones at once, the resume ones at the next resume)


@dataclass
class Expect:
    """What the next resume must show, from the faults since the last one."""

    checkpoint: int = -1  # the step it must resume from: the newest complete one that loads
    step: int = 0  # the lowest step allowed
    games: int = 0  # the fewest games allowed in replay
    corrupted: tuple[int, str, str] | None = None  # (step, file name, sha256) of a corrupted checkpoint
    kept: list[int] = field(default_factory=list)  # the complete checkpoints it must not delete


def lost_checkpoints(before: list[int], after: list[int], keep: int) -> list[int]:
    """Steps complete in `before` and gone in `after` that the rotation would have kept: a complete
    checkpoint may go only once `keep` newer complete ones exist."""
    return sorted(step for step in set(before) - set(after) if sum(other > step for other in after) < keep)


def check_resume(expect: Expect, step: int, games: int) -> list[str]:
    """The resume's step and games against `expect`; one message per broken promise."""
    failures = []
    if step != expect.checkpoint:
        failures.append(f"resumed from ckpt-{step}, not ckpt-{expect.checkpoint} (the newest that loads)")
    if step < expect.step:
        failures.append(f"resumed at step {step}, below {expect.step}: one checkpoint interval before the step reached")
    if games < expect.games:
        failures.append(f"resumed with {games} games, fewer than the {expect.games} logged or checkpointed")
    return failures


def process_tree(root: int) -> list[int]:
    """`root` and its descendants, from /proc (psutil is not among the project's dependencies)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                parent = int(Path(entry.path, "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(entry.name))
    tree, stack = [], [root]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack.extend(children.get(pid, []))
    return tree


def command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def resident_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
    return total


def is_ray(pid: int) -> bool:
    return b"ray" in command_line(pid)


def sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class MemoryWatch(threading.Thread):
    """Every second, the resident memory of the current trainer's process tree and of the
    processes that dead runs left behind (RSS summed, as docs/resume.md measured the
    estimate): its peak, and the tree's processes last seen."""

    def __init__(self):
        super().__init__(daemon=True)
        self.pid: int | None = None
        self.peak = 0
        self.tree: list[int] = []
        self.orphans: dict[int, float] = {}  # a dead run's process -> when its run died
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            pid = self.pid
            tree = process_tree(pid) if pid is not None else []
            if pid is not None:
                self.tree = tree
            self.peak = max(self.peak, resident_bytes(tree + list(self.orphans)))


def _copy_lines(pipe, out) -> None:
    with out:
        for line in iter(pipe.readline, b""):
            out.write(line)
            out.flush()


class Segment:
    """One `muzero train` process (fresh or --resume) and its log."""

    def __init__(self, index: int, command: list[str], env: dict[str, str], log: Path, piped: bool = False):
        self.index, self.log, self.started = index, log, time.time()
        out = log.open("wb")
        self.process = subprocess.Popen(
            command,
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE if piped else out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        if piped:  # the trainer's output is no file of its own, which RLIMIT_FSIZE would stop too
            threading.Thread(target=_copy_lines, args=(self.process.stdout, out), daemon=True).start()
        else:
            out.close()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def progress(self, since: int = 0) -> list[tuple[int, int, int]]:
        """(step, games, live actors) of the progress lines from character `since` on."""
        return [tuple(map(int, m.groups())) for m in PROGRESS.finditer(self.text(), since)]

    def resumed(self) -> tuple[int, int] | None:
        match = RESUMED.search(self.text())
        return (int(match.group(1)), int(match.group(2))) if match else None

    def wait_for(self, ready: Callable[[], bool], timeout: float = WAIT_SECONDS) -> bool:
        """Polls `ready()` until it holds (True), the trainer exits or `timeout` passes (False)."""
        deadline = time.time() + timeout
        while not ready():
            if self.process.poll() is not None or time.time() > deadline:
                return ready()
            time.sleep(0.2)
        return True

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class Disk:
    """The run folder's file system: a tmpfs of its own when root, else the real disk, where a
    full disk is simulated by RLIMIT_FSIZE (Python ignores SIGXFSZ: writes fail with EFBIG)."""

    def __init__(self, size_mib: int, simulate: bool):
        self.mount = Path(tempfile.mkdtemp(prefix="soak-disk-"))
        mount = ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(self.mount)]
        self.tmpfs = not simulate and os.geteuid() == 0 and subprocess.run(mount, check=False).returncode == 0
        self.filler = self.mount / "filler"
        self.reason = "No space left on device" if self.tmpfs else "File too large"
        self.describe = f"a tmpfs of {size_mib} MiB" if self.tmpfs else "simulated: RLIMIT_FSIZE 0 on the driver"

    def fill(self, pid: int, slack_pages: int) -> str:
        """Fills the disk, leaving `slack_pages` pages free (tmpfs), or stops `pid` growing files."""
        if not self.tmpfs:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            return "RLIMIT_FSIZE 0"
        fd, chunk = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1 << 20
        try:
            while True:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
                    if chunk == PAGE:
                        break
                    chunk = PAGE
            size = os.fstat(fd).st_size
            os.ftruncate(fd, max(size - slack_pages * PAGE, 0))
        finally:
            os.close(fd)
        return f"{size / 2**20:.0f} MiB filler, {slack_pages} pages left"

    def empty(self) -> None:
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.mount)], check=False)
        shutil.rmtree(self.mount, ignore_errors=True)


def hermetic_env(home: Path) -> dict[str, str]:
    """The trainer's environment: Ray's session files, its auth token and the libraries' caches in
    `home` (short: Ray's socket paths must stay under 107 bytes), nothing read from ~."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN", "RAY_ADDRESS")}
    token = home / "ray_auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    for name in ("ray", "keras", "matplotlib", "cache", "config"):
        (home / name).mkdir()
    env.update(
        RAY_TMPDIR=str(home / "ray"),
        RAY_AUTH_TOKEN_PATH=str(token),
        RAY_USAGE_STATS_ENABLED="0",
        TF_CPP_MIN_LOG_LEVEL="2",
        KERAS_HOME=str(home / "keras"),
        MPLCONFIGDIR=str(home / "matplotlib"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_CONFIG_HOME=str(home / "config"),
    )
    return env


def checkpoint_games(directory: Path, step: int) -> int:
    """Games the checkpoint at `step` recorded (played to their end: `episodes_saved`, as the
    progress and resume lines count them); 0 when its state does not load."""
    try:
        with open(directory / f"state-{step}.pkl", "rb") as f:
            replay = pickle.load(f)["replay"]
            return int(replay.get("episodes_saved", replay["games_saved"]))
    except Exception:  # noqa: BLE001 - the resume's check will tell what is wrong with it
        return 0


def corrupt_newest(directory: Path, rng: np.random.Generator) -> tuple[int, Path, str]:
    """Truncates or garbles one file of the newest complete checkpoint; (step, file, what was done)."""
    step = complete_steps(directory)[0]
    files = [directory / f"state-{step}.pkl", directory / f"ckpt-{step}.index"]
    files += sorted(directory.glob(f"ckpt-{step}.data-*"))
    path = files[int(rng.integers(len(files)))]
    data = bytearray(path.read_bytes())
    if rng.random() < 0.5:
        cut = int(rng.integers(0, len(data)))
        how = f"{path.name} truncated to {cut} of {len(data)} bytes"
        data = data[:cut]
    else:
        size = int(rng.integers(1, 65))
        offset = int(rng.integers(0, max(len(data) - size, 1)))
        for i, noise in enumerate(rng.integers(1, 256, size)):  # each byte changed
            if offset + i < len(data):
                data[offset + i] ^= int(noise)
        how = f"{path.name}: {size} bytes garbled at {offset} of {len(data)}"
    path.write_bytes(bytes(data))
    return step, path, how


def set_aside_whole(directory: Path, step: int, name: str, digest: str) -> bool:
    """A set-aside-*/ folder holds the checkpoint at `step`, its file `name` as corrupted."""
    for folder in directory.glob("set-aside-*"):
        pieces = [f"ckpt-{step}.complete", f"ckpt-{step}.index", f"state-{step}.pkl", name]
        whole = all((folder / piece).is_file() for piece in pieces) and any(folder.glob(f"ckpt-{step}.data-*"))
        if whole and hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest:
            return True
    return False


def leftovers(run_dir: Path) -> list[str]:
    """Temporaries, and checkpoint pieces of no complete checkpoint, that a failed write left behind."""
    checkpoints = run_dir / "checkpoints"
    complete = set(complete_steps(checkpoints))
    found = [str(p.relative_to(run_dir)) for p in run_dir.rglob("*.tmp*") if "set-aside-" not in str(p)]
    for entry in checkpoints.iterdir() if checkpoints.is_dir() else []:
        match = re.match(r"^(?:ckpt|state)-(\d+)[._]", entry.name)
        if match and int(match.group(1)) not in complete:
            found.append(str(entry.relative_to(run_dir)))
    return found


class Soak:
    """The segments, the faults and their checks (`run` is the loop)."""

    def __init__(self, args: argparse.Namespace, home: Path, disk: Disk):
        self.args, self.disk, self.env = args, disk, hermetic_env(home)
        self.rng = np.random.default_rng(args.seed)
        self.run_dir = disk.mount / "run"
        self.checkpoints = self.run_dir / "checkpoints"
        self.faults: list[Fault] = []
        self.segments: list[Segment] = []
        self.expect = Expect()
        self.watch = MemoryWatch()
        self.estimate = float("inf")
        self.started = time.time()
        self.last_step = self.last_games = 0
        self.problems: list[str] = []  # failures of no single fault
        self.up_seconds: list[float] = []  # from each segment's start to games played and a checkpoint

    def say(self, message: str) -> None:
        minutes, seconds = divmod(int(time.time() - self.started), 60)
        print(f"[{minutes:3d}:{seconds:02d}] {message}", flush=True)

    def fault(self, kind: str, detail: str) -> Fault:
        fault = Fault(kind, len(self.segments) - 1, detail)
        self.faults.append(fault)
        self.say(f"segment {fault.segment}: {KINDS[kind]}: {detail}")
        return fault

    def start(self) -> Segment:
        if self.segments:
            command = resume_command(self.run_dir)
        else:
            command = train_command(self.args.config, self.run_dir, self.args.seed, SETTINGS)
        log = self.args.out / f"segment-{len(self.segments):03d}.log"
        segment = Segment(len(self.segments), command, self.env, log, piped=not self.disk.tmpfs)
        self.segments.append(segment)
        self.watch.pid = segment.process.pid
        return segment

    def settle(self, segment: Segment) -> None:
        """The resume checks of the faults waiting for one, once `segment` logged its resume."""
        resumed = segment.resumed()
        pending = [
            f
            for f in self.faults
            if not f.settled and f.kind in ("trainer", "disk", "corrupt") and f.segment < segment.index
        ]
        if resumed is None or not pending:
            return
        failures = check_resume(self.expect, *resumed)
        lost = lost_checkpoints(self.expect.kept, complete_steps(self.checkpoints), MAX_CHECKPOINTS)
        failures += [f"the resume deleted ckpt-{step}" for step in lost]
        if self.expect.corrupted is not None:
            step, name, digest = self.expect.corrupted
            logs = "".join(s.text() for s in self.segments[pending[0].segment + 1 :])
            if not re.search(rf"{re.escape(name)} is corrupted", logs):
                failures.append(f"no warning naming the corrupted {name}")
            if not set_aside_whole(self.checkpoints, step, name, digest):
                failures.append(f"ckpt-{step} not set aside whole")
        for fault in pending:
            fault.failures += failures
            fault.settled = True
        self.say(
            f"segment {segment.index}: resumed at ckpt-{resumed[0]} with {resumed[1]} games: "
            + ("; ".join(failures) or f"{len(pending)} fault(s) survived")
        )
        self.expect.corrupted = None

    def training(self, segment: Segment) -> bool:
        """Games played since the segment started, and a complete checkpoint on disk."""
        resumed = segment.resumed()
        games = resumed[1] if resumed else 0
        return any(g > games for _, g, _ in segment.progress()) and bool(complete_steps(self.checkpoints))

    def kill_worker(self, segment: Segment) -> None:
        """SIGKILL of one self-play worker process; the run must restart it and play on."""
        workers = [p for p in process_tree(segment.process.pid) if command_line(p).startswith(b"ray::SelfPlayWorker")]
        if not workers:
            return
        text = segment.text()
        games, restarts = segment.progress()[-1][1], len(RESTARTED.findall(text))
        pid = workers[int(self.rng.integers(len(workers)))]
        sigkill(pid)
        fault = self.fault("worker", f"pid {pid} of {len(workers)}, at {games} games")

        def recovered() -> bool:
            text = segment.text()
            marks = list(RESTARTED.finditer(text))
            return len(marks) > restarts and any(
                g > games and live == 2 for _, g, live in segment.progress(marks[-1].end())
            )

        if not segment.wait_for(recovered, 120):
            fault.failures.append("no restart, or no new games from 2 live actors, within 120 s")
        if "restarts used up" in segment.text() or segment.process.poll() is not None:
            fault.failures.append("the run did not go on")
        fault.settled = True

    def end(self, segment: Segment, kind: str, early: bool) -> Fault:
        """The segment's last fault: the trainer killed, or stopped by a full disk."""
        before, status = complete_steps(self.checkpoints), segment.process.poll()
        if kind == "trainer":
            segment.kill()
            seconds = time.time() - segment.started
            fault = self.fault(kind, f"{seconds:.1f} s after start" + (", in start-up" if early else ""))
            if status is not None:
                fault.failures.append(f"the trainer had exited by itself (status {status})")
        else:
            fault = self.fault(kind, self.disk.fill(segment.process.pid, int(self.rng.integers(0, 65))))
            if not segment.wait_for(lambda: segment.process.poll() is not None, 180):
                fault.failures.append("the trainer did not stop within 180 s")
            segment.kill()
            fault.failures += self.check_stop(segment, fault)
            self.disk.empty()
        after = complete_steps(self.checkpoints)
        fault.failures += [
            f"complete checkpoint lost: ckpt-{s}" for s in lost_checkpoints(before, after, MAX_CHECKPOINTS)
        ]
        self.reap()
        return fault

    def check_stop(self, segment: Segment, fault: Fault) -> list[str]:
        """A full disk's stop: exit status 1, one line naming the error and the newest complete
        checkpoint, no traceback, nothing left behind by the failed write."""
        text, status, newest = segment.text(), segment.process.returncode, complete_steps(self.checkpoints)[:1]
        stops = STOPPED.findall(text)
        line = stops[-1] if stops else ""
        fault.detail += "; stopped writing the " + (
            "game journal" if "journal" in line else "checkpoint" if line else "-"
        )
        failures = [f"left behind: {path}" for path in leftovers(self.run_dir)]
        if status != 1 or self.disk.reason not in line:
            failures.append(f"exit status {status}, not 1 with one line naming {self.disk.reason!r}")
        if newest and not re.search(rf"ckpt-{newest[0]}\b", line):
            failures.append(f"the line does not name the newest complete checkpoint, ckpt-{newest[0]}: {line}")
        if "Traceback" in text:
            failures.append("a traceback in the output")
        return failures

    def reap(self, wait: bool = False) -> None:
        """Remembers the dead trainer's processes still alive (Ray's agents outlive a driver killed
        by SIGKILL by about a minute: they count in the memory peak meanwhile); kills those that
        outlived their run by ORPHAN_SECONDS, which is a failure. `wait`: until none is left."""
        now = time.time()
        for pid in self.watch.tree:
            if pid != self.watch.pid:
                self.watch.orphans.setdefault(pid, now)
        self.watch.pid = None
        while True:
            for pid, since in list(self.watch.orphans.items()):
                if not is_ray(pid):
                    del self.watch.orphans[pid]
                elif time.time() - since > ORPHAN_SECONDS:
                    self.problems.append(f"{command_line(pid)[:40]!r} outlived its run by {ORPHAN_SECONDS:.0f} s")
                    sigkill(pid)
                    del self.watch.orphans[pid]
            if not (wait and self.watch.orphans):
                return
            time.sleep(1.0)

    def expect_after(self, segment: Segment) -> None:
        """What the next resume must show, from the disk and the dead segment's log; then, after
        half of the stops, the newest checkpoint corrupted."""
        self.settle(segment)
        reached = [(step, games) for step, games, _ in segment.progress()] or [segment.resumed()]
        if reached[-1] is not None:
            self.last_step, self.last_games = reached[-1]
        corrupted = self.expect.corrupted[0] if self.expect.corrupted else None  # no resume since: still there
        steps = [step for step in complete_steps(self.checkpoints) if step != corrupted]
        if not steps:
            self.problems.append(f"segment {segment.index}: no complete checkpoint left")
            return
        if corrupted is None:
            self.expect.step = self.last_step - CHECKPOINT_INTERVAL
        self.expect.games = max(self.expect.games, self.last_games, checkpoint_games(self.checkpoints, steps[0]))
        self.expect.checkpoint, self.expect.kept = steps[0], steps
        corruptions = sum(f.kind == "corrupt" for f in self.faults)
        if corruptions * 2 < len(self.segments) and len(steps) >= 2 and corrupted is None:
            step, path, how = corrupt_newest(self.checkpoints, self.rng)
            self.fault("corrupt", how)
            self.expect.corrupted = (step, path.name, hashlib.sha256(path.read_bytes()).hexdigest())
            self.expect.checkpoint, self.expect.kept = steps[1], steps[1:]
            self.last_step = step  # the step reached is the corrupted checkpoint's, one interval back is allowed
            self.expect.step = step - CHECKPOINT_INTERVAL

    def run(self) -> None:
        self.watch.start()
        deadline = self.started + self.args.minutes * 60
        while True:
            segment = self.start()
            counts = {k: sum(f.kind == k for f in self.faults) for k in ("trainer", "disk")}
            kind = min(counts, key=lambda k: (counts[k], self.rng.random()))
            early = kind == "trainer" and segment.index > 0 and self.rng.random() < EARLY_KILLS
            if early and time.time() < deadline:
                time.sleep(self.rng.uniform(0.5, 12.0))
            else:
                if not segment.wait_for(functools.partial(self.training, segment)):
                    self.problems.append(f"segment {segment.index} did not train within {WAIT_SECONDS:.0f} s")
                    break
                self.up_seconds.append(time.time() - segment.started)
                self.settle(segment)
                match = MEMORY.search(segment.text())
                self.estimate = min(self.estimate, float(match.group(1)) * GIB if match else 0.0)
                if time.time() > deadline:
                    break
                time.sleep(self.rng.uniform(1.0, 10.0))
                self.kill_worker(segment)
                time.sleep(self.rng.uniform(1.0, 15.0))
            self.end(segment, kind, early)
            self.expect_after(segment)
        segment.process.send_signal(signal.SIGTERM)  # the last segment stops as a user would
        if segment.process.wait(timeout=120) != 0:
            self.problems.append(f"the last segment's SIGTERM: exit status {segment.process.returncode}")
        self.reap(wait=True)

    def report(self) -> str:
        """The table of faults, and the run's figures."""
        rows = []
        for kind, name in KINDS.items():
            faults = [f for f in self.faults if f.kind == kind]
            survived = sum(f.settled and not f.failures for f in faults)
            rows.append((name, len(faults), survived, len(faults) - survived))
        last = self.segments[-1].progress()
        up = self.up_seconds or [float("nan")]
        lines = [
            markdown_table(("fault", "injected", "survived", "failed"), rows),
            "",
            (
                f"* wall time: {(time.time() - self.started) / 60:.1f} min; {len(self.segments)} segments "
                f"(1 fresh start, {len(self.segments) - 1} resumes); disk: {self.disk.describe}"
            ),
            f"* training steps reached: {last[-1][0] if last else '-'}; games: {last[-1][1] if last else '-'}",
            (
                f"* from a segment's start to new games and a checkpoint: median {np.median(up):.1f} s, "
                f"first {up[0]:.1f} s, last {up[-1]:.1f} s, longest {max(up):.1f} s"
            ),
            (
                f"* peak resident memory of the trainer's process tree: {self.watch.peak / GIB:.2f} GiB; "
                f"estimate (first log line): {self.estimate / GIB:.2f} GiB"
            ),
        ]
        if self.watch.peak > self.estimate:
            lines.append("* FAILED: memory above the estimate")
        lines += [f"* FAILED: {problem}" for problem in self.problems]
        for fault in self.faults:
            if fault.failures or not fault.settled:
                lines.append(
                    f"* FAILED: segment {fault.segment}, {KINDS[fault.kind]} ({fault.detail}): "
                    + ("; ".join(fault.failures) or "never checked")
                )
        return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="wall time of the faults (then one last resume)")
    parser.add_argument("--seed", type=int, default=0, help="the fault moments' and the run's seed")
    parser.add_argument("--out", type=Path, default=Path("runs/soak/latest"), help="segment logs and report.md")
    parser.add_argument("--config", default=str(ROOT / "configs" / "tiny.yaml"))
    parser.add_argument("--tmpfs-mib", type=int, default=512, help="size of the run folder's tmpfs (as root)")
    parser.add_argument("--simulate-disk", action="store_true", help="no tmpfs even as root: RLIMIT_FSIZE")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="soak-", dir="/tmp"))
    disk = Disk(args.tmpfs_mib, args.simulate_disk)
    soak = Soak(args, home, disk)
    soak.say(f"soak for {args.minutes:g} min, seed {args.seed}; run folder {soak.run_dir} ({disk.describe})")
    try:
        soak.run()
    finally:
        if soak.segments:  # after a failure or Ctrl-C: whatever of the run is left goes now
            soak.segments[-1].kill()
            for pid in [*soak.watch.tree, *soak.watch.orphans]:
                if is_ray(pid):
                    sigkill(pid)
        soak.watch.done.set()
        if (soak.run_dir / "log.txt").is_file():
            shutil.copy(soak.run_dir / "log.txt", args.out / "log.txt")
        disk.close()
        shutil.rmtree(home, ignore_errors=True)
    report = soak.report()
    (args.out / "report.md").write_text(report + "\n")
    write_csv(args.out / "faults.csv", [dataclasses.asdict(fault) for fault in soak.faults])
    print(report)
    return 1 if "FAILED" in report else 0


if __name__ == "__main__":
    sys.exit(main())
