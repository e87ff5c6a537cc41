"""OCF end to end: a training run killed with SIGKILL, resumed by structure, checked.

1. A training process (a child of this one: ``demo.py train DIR``) trains a
   small NumPy network with Adam and saves its whole state, weights and
   Adam's slot variables, through ``ocf.CheckpointManager`` after every step.
2. Once a few checkpoints are committed it is killed with SIGKILL, mid-run.
3. This program, which never trained, builds the network afresh with other
   layer names (weights created on first use), finds the latest checkpoint,
   restores it by structure and trains on. Every loss equals the loss of an
   uninterrupted run, bit for bit.
4. The ``ocf`` command line lists the run's directory, draws the object
   graph, verifies every checksum, and catches a copy with one flipped bit.

Needs only the core package (NumPy, protobuf, zstandard, crc32c, ml-dtypes).
Exits non-zero if any step does not behave as described.

Run: python python/examples/demo.py
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from resume_training import Adam, Network, train  # the model: python/examples/

import ocf

STEPS = 12  # the length of the whole run
KILL_AFTER = 5  # the training process is killed once a checkpoint of this step is committed
PACE = 0.05  # seconds between the child's steps, so that the kill lands mid-run


def train_and_save(directory: str) -> None:
    """The training process: one step, one checkpoint, until killed (or STEPS * 10)."""
    model, optimizer = Network("first_run"), Adam()
    manager = ocf.CheckpointManager(ocf.Checkpoint(model=model, optimizer=optimizer),
                                    directory, max_to_keep=3)
    for step in range(1, STEPS * 10 + 1):
        (loss,) = train(model, optimizer, 1)
        path = manager.save(checkpoint_number=step)
        print(f"step {step} loss {loss!r} saved {Path(str(path)).name}", flush=True)
        time.sleep(PACE)


def run_until_killed(directory: Path) -> dict[int, float]:
    """Start the training process, SIGKILL it mid-run; the losses it reported, by step."""
    child = subprocess.Popen([sys.executable, __file__, "train", str(directory)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    losses: dict[int, float] = {}
    for line in child.stdout:
        print(f"  [training process {child.pid}] {line.rstrip()}")
        fields = line.split()
        if len(fields) == 6 and fields[0] == "step":
            losses[int(fields[1])] = float(fields[3])
            if int(fields[1]) >= KILL_AFTER:
                os.kill(child.pid, signal.SIGKILL)
                break
    child.stdout.close()
    status = child.wait()
    if status != -signal.SIGKILL:
        sys.exit(f"the training process ended with status {status}, not by SIGKILL")
    print(f"  killed process {child.pid} with SIGKILL after step {max(losses)}")
    return losses


def resume(directory: Path) -> tuple[int, dict[int, float]]:
    """A fresh program: other layer names, nothing built; restore the latest and train on."""
    path = ocf.latest_checkpoint(directory)
    if path is None:
        sys.exit(f"no committed checkpoint in {directory}")
    model, optimizer = Network("resumed"), Adam()
    # partial: the layers build on the first forward pass, and take their values then.
    status = ocf.Checkpoint(model=model, optimizer=optimizer).restore(path, partial=True)
    start = optimizer.iterations  # restored: the step the checkpoint was saved at
    print(f"  restored {Path(path).name} (step {start}) into a network built afresh")
    losses = train(model, optimizer, STEPS - start)
    status.assert_consumed()  # every saved value found its object, and the reverse
    return start, dict(enumerate(losses, start=start + 1))


def ocf_command(*args: str, expect: int = 0) -> None:
    """Run the ``ocf`` console script installed next to this Python, and show its output."""
    script = Path(sys.executable).with_name("ocf")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "ocf"]
    print(f"$ ocf {' '.join(args)}")
    done = subprocess.run([*command, *args], capture_output=True, text=True)
    print((done.stdout + done.stderr).rstrip())
    if done.returncode != expect:
        sys.exit(f"ocf {args[0]} exited {done.returncode}, expected {expect}")


def flip_one_bit(source: str, target: Path) -> None:
    """Copy ``source`` to ``target`` with one bit flipped in its largest tensor."""
    with ocf.open(source) as reader:
        key = max(reader, key=lambda k: reader[k].stored_length)
        offset = reader[key].blocks[0].offset
    shutil.copy(source, target)
    with target.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x10]))
    print(f"  copied {Path(source).name} to {target.name} and flipped a bit of {key!r}")


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="ocf-demo-"))
    run = work / "training"
    print("== 1. train, saving a checkpoint after every step; 2. SIGKILL mid-run")
    before = run_until_killed(run)
    print("\n== 3. resume in a fresh program, by structure")
    start, after = resume(run)
    uninterrupted = dict(enumerate(train(Network("reference"), Adam(), STEPS), start=1))
    resumed = {**{s: before[s] for s in range(1, start + 1)}, **after}
    for step, loss in uninterrupted.items():
        where = "killed run" if step <= start else "resumed   "
        print(f"  step {step:2d}  uninterrupted {loss:.17g}  {where} {resumed[step]:.17g}")
    if resumed != uninterrupted:
        print("losses differ from the uninterrupted run", file=sys.stderr)
        return 1
    print("  losses match the uninterrupted run bit for bit")

    print("\n== 4. look inside and check, with the ocf command line")
    latest = ocf.latest_checkpoint(run)
    assert latest is not None
    ocf_command("inspect", str(run))
    ocf_command("tree", latest)
    ocf_command("verify", latest)
    corrupt = work / "corrupt.ocf"
    flip_one_bit(latest, corrupt)
    ocf_command("verify", str(corrupt), expect=1)
    shutil.rmtree(work)
    print("\ndemo finished: every step behaved as expected")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"]:
        train_and_save(sys.argv[2])
    else:
        sys.exit(main())
