"""bench/_fresh.py: under the tiny runs a benchmark's "fresh interpreters" are forks, which
end as new interpreters would (exit status, output, a failure's traceback, a kill), and a
child that would import other code is a new interpreter. Run in a process of its own: the
forking copy is made when the module is imported, and only with no other thread running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import kpca_dask  # what a child's PYTHONPATH names, imported here as the page server has it
import _fresh

folder, env = sys.argv[2], {**os.environ, "PYTHONPATH": sys.argv[3]}
def script(name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as file:
        file.write(text)
    return path

found = {"copy": _fresh._CHANNEL is not None}
done = _fresh.run_python([script("ends.py", "import os, sys\nprint('out', os.getpid())\n"
                                  "print('err', file=sys.stderr)\nsys.exit(3)\n")], env=env)
found["ends"] = [done.returncode, done.stdout.split()[0], done.stderr, done.stdout.split()[1]
                 != str(os.getpid())]
done = _fresh.run_python([script("fails.py", "raise ValueError('no such thing')\n")], env=env)
found["fails"] = [done.returncode, "ValueError: no such thing" in done.stderr]
with open(os.path.join(folder, "o"), "w") as out, open(os.path.join(folder, "e"), "w") as err:
    child = _fresh.start_python([script("waits.py", "import time\ntime.sleep(60)\n")], env=env,
                                stdout=out, stderr=err)
    found["forked"] = type(child).__name__
    time.sleep(0.2)
    found["running"] = child.poll()
    child.kill()
    found["killed"] = child.wait()
done = _fresh.run_python(["-m", "json.tool", script("a.json", "[1]")], env=env, cwd=folder)
found["module"] = [done.returncode, done.stdout.split()]
other = {**env, "PYTHONPATH": folder}
with open(os.path.join(folder, "o"), "w") as out:
    found["other code"] = type(_fresh.start_python(["-c", "pass"], env=env, stdout=out,
                                                   stderr=out)).__name__
    found["other package"] = type(_fresh.start_python([script("x.py", "")], env=other,
                                                      stdout=out, stderr=out)).__name__
print(json.dumps(found))
"""


def test_forked_children_end_as_new_interpreters(tmp_path):
    env = {**os.environ, "KPCA_DASK_BENCH_PRELOADED": "1", "PYTHONPATH": str(REPOSITORY)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(REPOSITORY / "bench"),
                           str(tmp_path), str(REPOSITORY)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["copy"] and found["forked"] == "Forked"
    assert found["ends"] == [3, "out", "err\n", True]
    assert found["fails"] == [1, True]
    assert found["running"] is None and found["killed"] == -9
    assert found["module"] == [0, ["[", "1", "]"]]
    assert found["other code"] == found["other package"] == "Popen"
