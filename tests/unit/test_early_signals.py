"""A signal in the first moments of ``chunkmill`` (before the command's own handler is in
place) is one line and exit 130 / 143, never a traceback; a program importing chunkmill
keeps its own handlers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunkmill import early_signals

ROOT = Path(__file__).parents[2]
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
# What pip writes as the console script (``chunkmill = "chunkmill.pipeline.cli:main"``).
CONSOLE_SCRIPT = """\
import re
import sys
from chunkmill.pipeline.cli import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}


@pytest.mark.parametrize(
    ("argv", "orig_argv", "expected"),
    [
        (["-m", "run"], ["python", "-m", "chunkmill", "run"], True),
        (["-m"], ["python", "-X", "importtime", "-mchunkmill"], True),
        (["-m"], ["python", "-u", "-X", "importtime", "-m", "chunkmill"], True),
        (["/venv/bin/chunkmill", "run"], ["python", "/venv/bin/chunkmill", "run"], True),
        (["-m"], ["python", "-m", "pytest", "-m", "chunkmill"], False),
        (["-c"], ["python", "-c", "import chunkmill", "-m", "chunkmill"], False),
        (["app.py"], ["python", "app.py", "-m", "chunkmill"], False),
        (["-m"], ["python", "-m", "chunkmill.pipeline.cli"], False),
    ],
)
def test_only_the_chunkmill_command_is_recognised(argv, orig_argv, expected):
    assert early_signals.is_the_command(argv, orig_argv) is expected


def test_the_console_script_handles_signals_before_chunkmill_imports_anything_else(tmp_path):
    # Records, as each chunkmill module is imported, whether SIGTERM is handled yet.
    probe = f"""
import json, signal, sys

class Watch:
    seen = []
    def find_spec(self, name, path=None, target=None):
        if name.startswith("chunkmill"):
            handled = signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            self.seen.append((name, handled))
        return None

sys.meta_path.insert(0, Watch())
sys.argv[1:] = ["--version"]
try:
    exec(compile({CONSOLE_SCRIPT!r}, sys.argv[0], "exec"), {{"__name__": "__main__"}})
except SystemExit:
    pass
print(json.dumps(Watch.seen), file=sys.stderr)
"""
    script = tmp_path / "bin" / "chunkmill"
    script.parent.mkdir()
    script.write_text(probe)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=_env(), timeout=120
    )
    seen = json.loads(done.stderr.splitlines()[-1])
    assert done.stdout.startswith("chunkmill ")
    assert [name for name, _ in seen[:2]] == ["chunkmill", "chunkmill.early_signals"]
    assert [name for name, handled in seen[2:] if not handled] == []


def test_importing_chunkmill_leaves_the_program_s_handlers_alone():
    probe = "import signal, chunkmill; print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert done.stdout.strip() == "True", done.stderr


def _catches_sigterm(pid: int) -> bool:
    """The process has a handler for SIGTERM (Python installs none of its own)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("entry", ["module", "console script"])
def test_a_signal_as_the_command_starts_is_one_line(sig, entry, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nhello\n")
    script = tmp_path / "bin" / "chunkmill"
    script.parent.mkdir()
    script.write_text(CONSOLE_SCRIPT)
    start = (
        [sys.executable, "-m", "chunkmill"] if entry == "module" else [sys.executable, str(script)]
    )
    argv = [*start, "run", "--input", f"{docs}/*", "--output", str(tmp_path / "out")]
    # From the moment chunkmill's first handler is in place, through the imports that follow.
    for delay in (0.0, 0.002, 0.01, 0.03, 0.1):
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(), cwd=tmp_path
        )
        deadline = time.monotonic() + 60
        while not _catches_sigterm(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.0005)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        lines = err.decode().splitlines()
        assert proc.returncode == EXIT[sig], (delay, lines)
        assert len(lines) == 1 and "Traceback" not in err.decode(), (delay, lines)
        assert lines[0].startswith("chunkmill: run interrupted (" + sig.name + ")"), (delay, lines)
