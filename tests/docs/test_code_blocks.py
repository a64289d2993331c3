"""Every code block of README.md and the docs pages runs, at a small size, the way a reader would run it.

A page's blocks run in order in one temporary folder that holds the checkout's files (a copy of docs/, links to
the rest), as a reader in the checkout would run them: ``bash`` blocks line by line, ``netfl`` commands shrunk
to a few rounds and seeds by the options below; ``python`` blocks as scripts (one marked
``<!-- test: file NAME -->`` is the user's file of that name, written and imported); ``yaml`` blocks are
topologies (a whole one validated as it is, a fragment validated inside the quickstart, at the top level or in
its first device group, as its keys say) or a study file equal to the file it names. A block that is output
is tagged ``text``. A ``{toctree}``, ``{include}`` or ``{eval-rst}`` fence is no code but the site's markup (the
navigation, an included file, the API pages' autodoc directives), which the site's strict build checks
(tests/docs/test_site.py). Any other language, or an untagged
block, fails: no block is skipped unseen.

Where they run: in this process, in the page's folder, so that no command pays a fresh interpreter's import of
torch (seconds each): ``netfl`` commands through click's test runner on the ``netfl`` group (its exit code
and output as the shell would see them), ``python`` blocks and ``python SCRIPT`` lines executed in a fresh
``__main__`` namespace (a traceback names the page and its line), sphinx-build through its own entry point. A
process of its own only where the behaviour is a process's: the run stopped with Ctrl-C (a signal) so that
``netfl resume`` has a checkpoint; ``netfl sweep`` still runs its runs in its pool of processes. A read-only
command that several pages show alike (``netfl validate`` of a file of the
checkout, ``netfl algorithms``, ``netfl policies``) runs once per session, keyed by its text and the file's
bytes.

The few commands not run here say why below (NOT_RUN: the suite itself, hours-long benchmarks, the notebook
that another test executes), and get the check that can run: the command is what CI runs, its options are the
script's, its calls bind to the installed signatures.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(
    r"^(?:<!-- test: (?P<mark>[^>]*) -->\n)?^```(?P<lang>[^\s`]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S
)
LANGUAGES = {"bash", "python", "yaml", "text"}
#: MyST directives written as fences: the site's markup, built (and so checked) by tests/docs/test_site.py.
DIRECTIVES = {"{toctree}", "{include}", "{eval-rst}"}

#: Added to every `netfl simulate` / `sweep` of the docs, and to every topology file a Python block loads: one
#: round (the evaluations before and after it give every table and figure its rows), one seed.
SMALL_RUN = ["--set", "stop.rounds=1"]
SMALL_SWEEP = ["--seeds", "1", "--jobs", "2", "--set", "stop.rounds=1"]
#: Worlds that are large by design, shrunk further (their point, the scale, is measured in benchmarks/).
SMALLER_WORLD = {"topologies/million-phones.yaml": ["--set", "devices[0].count=2000"]}
#: The run that `netfl resume` goes on from: stopped with Ctrl-C at its first checkpoint, with rounds enough
#: left that it cannot finish before the signal arrives; its rounds made short (two local steps, no evaluation
#: before the end) so that resuming and rerunning it is cheap.
RESUMABLE_RUN = ["--set", "stop.rounds=20", "--set", "task.local.steps=2", "--set", "eval.every=1000 rounds"]
#: Lines that cannot run here, with the reason; each gets the check in `not_run`.
NOT_RUN = {
    "pytest": "the test suite itself; .ci/run runs the README's test command verbatim",
    "python benchmarks/speed.py": "benchmarks of minutes to hours, run by hand; their options are checked",
    "python -c": "the tutorial notebook, which tests/end_to_end/test_tutorial.py executes with nbclient as this "
    "command does (half a minute: not twice in one suite); the command's calls are checked against nbformat's "
    "and nbclient's signatures",
}
#: `netfl` commands that only read the files they name and print: run once per session (see `netfl_command`).
READ_ONLY = {"validate", "algorithms", "policies"}


@dataclass
class Block:
    page: Path
    lang: str
    body: str
    mark: str | None
    line: int

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line} ({self.lang})"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(page, m.group("lang"), m.group("body"), m.group("mark"), text.count("\n", 0, m.start("lang")) + 1)
        for m in FENCE.finditer(text)
    ]


def test_every_block_is_run_or_marked_as_output() -> None:
    found = [b for page in PAGES for b in blocks(page)]
    assert len(found) > 40
    untagged = [str(b) for b in found if b.lang not in LANGUAGES | DIRECTIVES]
    assert not untagged, f"tag each block bash, python, yaml (run here) or text (output, not run): {untagged}"
    for page in PAGES:  # every fence is one FENCE found: an odd ``` line would hide the blocks after it
        fences = sum(1 for line in page.read_text().splitlines() if line.startswith("```"))
        assert fences == 2 * len(blocks(page)), page


# ------------------------------------------------------------------------------------------------ a page's folder


def workdir(tmp: Path) -> Path:
    """A folder holding the checkout as the reader's working directory: docs/ copied (commands write into
    docs/studies/*/report), everything else linked."""
    for entry in REPO.iterdir():
        if entry.name in (".git", ".venv", "results", "site") or entry.name.startswith("."):
            continue
        if entry.name == "docs":
            shutil.copytree(entry, tmp / "docs")
        else:
            (tmp / entry.name).symlink_to(entry)
    return tmp


def environment() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "MPLBACKEND": "Agg"}


@contextmanager
def inside(cwd: Path, argv: list[str] | None = None) -> Iterator[None]:
    """The reader's process, played by this one: the page's folder as the working directory and the first entry
    of sys.path (its user files import), ``argv``, Agg for figures. After: all of it as it was, the modules
    imported from the folder dropped (another page has its own files of those names), the figures closed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    saved = os.getcwd(), list(sys.path), sys.argv, os.environ.get("MPLBACKEND")
    modules = set(sys.modules)
    os.chdir(cwd)
    sys.path.insert(0, str(cwd))
    sys.argv = argv if argv is not None else [sys.argv[0]]
    os.environ["MPLBACKEND"] = "Agg"
    try:
        yield
    finally:
        os.chdir(saved[0])
        sys.path[:], sys.argv = saved[1], saved[2]
        if saved[3] is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = saved[3]
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(cwd)):
                del sys.modules[name]
        plt.close("all")


def failed(what: str) -> AssertionError:
    """The exception raised in this process by ``what`` (a command, a block), as a failure with its traceback."""
    return AssertionError(f"{what} raised:\n{traceback.format_exc()}")


def in_process(group, words: list[str], cwd: Path, stdout: Path | None = None) -> str:
    """``words`` (a command and its arguments) run through click's test runner on the command ``group``, in
    ``cwd``: its exit code checked as the shell's, its standard output returned (or written to ``stdout``)."""
    from click.testing import CliRunner

    with inside(cwd):
        result = CliRunner().invoke(group, words[1:], catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        trace = "".join(traceback.format_exception(*result.exc_info))
        raise AssertionError(f"{shlex.join(words)} raised:\n{result.output}\n{trace}")
    assert result.exit_code == 0, f"{shlex.join(words)} exited {result.exit_code}:\n{result.output}"
    if stdout is None:
        return result.stdout
    stdout.write_text(result.stdout)
    return ""


#: (command text, the bytes of the files it names) -> its output: the read-only commands already run.
DONE: dict[tuple[str, str], str] = {}


def netfl_command(words: list[str], cwd: Path, stdout: Path | None = None) -> str:
    """A ``netfl`` command, in this process. One of READ_ONLY whose files are all the checkout's (the same on
    every page) and that another page already ran alike is not run again: its output is the first run's."""
    from netfl.cli.main import main

    named = [cwd / w for w in words[2:] if not w.startswith("-") and (cwd / w).is_file()]
    key = None
    if words[1] in READ_ONLY and stdout is None and all(p.resolve().is_relative_to(REPO) for p in named):
        key = (shlex.join(words), "".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in named))
        if key in DONE:
            return DONE[key]
    out = in_process(main, words, cwd, stdout)
    if key is not None:
        DONE[key] = out
    return out


def run_source(source: str, filename: str, cwd: Path, argv: list[str]) -> None:
    """Python source run as ``python FILE`` runs it, in a fresh ``__main__`` namespace in this process."""
    code = compile(source, filename, "exec")
    with inside(cwd, argv):
        exec(code, {"__name__": "__main__", "__file__": filename, "__builtins__": __builtins__})


@contextmanager
def small_topologies() -> Iterator[None]:
    """Inside: a topology file read from Python (``netfl.run(PATH)``, ``netfl.load``) gets SMALL_RUN's
    ``--set``, as a command does."""
    import netfl.api

    load = netfl.api.load_scenario
    netfl.api.load_scenario = lambda path, overrides=(), **kw: load(path, overrides=[*overrides, SMALL_RUN[1]], **kw)
    try:
        yield
    finally:
        netfl.api.load_scenario = load


# --------------------------------------------------------------------------------------------------------- bash


def commands(body: str) -> list[str]:
    """The block's commands: lines joined at a trailing backslash, comments dropped, && lists split."""
    joined = body.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            found += [part.strip() for part in shlex.join(words).split(" '&&' ")]
    return found


def smaller(words: list[str]) -> list[str]:
    """A netfl command at the docs test's size: a few rounds, one seed, a smaller world where it is large."""
    if words[1] == "simulate":
        extra = SMALL_RUN + SMALLER_WORLD.get(words[2], [])
        if "--device" in words and words[words.index("--device") + 1].startswith("cuda"):
            import torch

            if not torch.cuda.is_available():  # the GPU page's command; the same run on the CPU here
                words = [w if not w.startswith("cuda") else "cpu" for w in words]
        return words + extra
    if words[1] == "sweep":
        return words + SMALL_SWEEP
    return words


def in_folder(words: list[str], cwd: Path) -> list[str]:
    """The command with its absolute /tmp/ paths moved into the page's folder: no run of the test meets another's
    (or a reader's) results there."""
    return [str(cwd / "tmp" / w[len("/tmp/") :]) if w.startswith("/tmp/") else w for w in words]


def not_run(command: str) -> bool:
    """Checks a command that cannot run here, if it is one (NOT_RUN), and says so."""
    if command == "pytest":
        ci = (REPO / ".ci" / "run").read_text()
        assert 'pip install torch==2.13.0 -e ".[test]" && pytest' in ci
        return True
    if command.startswith("python benchmarks/speed.py"):
        source = (REPO / "benchmarks" / "speed.py").read_text()
        sections = re.search(r"^SECTIONS = (.*)$", source, re.M).group(1)
        words = shlex.split(command)[2:]
        for option, value in zip(words[::2], words[1::2]):
            assert f'"{option}"' in source, option
            if option == "--only":
                assert all(f'"{s}"' in sections for s in value.split(",")), value
        return True
    if command.startswith("python -c ") and "tutorial.ipynb" in command:
        the_notebook_command(shlex.split(command)[2])
        return True
    return False


def the_notebook_command(code: str) -> None:
    """The tutorial's headless command: the modules it imports exist, each call binds to the installed
    signature, it reads the notebook that tests/end_to_end/test_tutorial.py executes with the same client, and
    it executes what it read."""
    import ast
    import inspect

    import nbclient
    import nbformat

    tree = ast.parse(code)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"nbclient", "nbformat"}, imported
    calls = {ast.unparse(c.func): c for c in ast.walk(tree) if isinstance(c, ast.Call)}
    functions = {"nbformat.read": nbformat.read, "nbclient.NotebookClient": nbclient.NotebookClient}
    for name, function in functions.items():
        call = calls[name]
        args = [ast.literal_eval(a) if isinstance(a, ast.Constant) else a for a in call.args]
        inspect.signature(function).bind(*args, **{k.arg: k.value for k in call.keywords})
    path = calls["nbformat.read"].args[0].value
    assert (REPO / path).is_file() and path == "examples/tutorial.ipynb", path
    resources = ast.literal_eval(next(k.value for k in calls["nbclient.NotebookClient"].keywords))
    assert resources == {"metadata": {"path": "."}}, resources  # it runs in the folder the reader is in
    execute = [name for name in calls if name.startswith("nbclient.NotebookClient(") and name.endswith(".execute")]
    assert execute and callable(nbclient.NotebookClient.execute), calls
    runner = (REPO / "tests" / "end_to_end" / "test_tutorial.py").read_text()
    assert 'NOTEBOOK = REPO / "examples" / "tutorial.ipynb"' in runner and "nbclient.NotebookClient(" in runner
    assert ").execute()" in runner


def set_up(command: str, cwd: Path) -> bool:
    """The set-up commands of the install lines: checked against what they install (the environment the tests
    run in is the one they make), and the extras they name exist."""
    words = shlex.split(command)
    if words[:3] == ["python3", "-m", "venv"] or words[:1] == ["."]:
        assert (REPO / ".ci" / "run").read_text().count("python3 -m venv .venv && . .venv/bin/activate") == 1
        return True
    if words[:2] == ["pip", "install"]:
        extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        for word in words[2:]:
            if word.startswith("."):
                assert all(extra in extras for extra in re.findall(r"\w+", word[1:])), word
            elif word.startswith("torch=="):
                import torch

                assert torch.__version__.split("+")[0] == word.split("==")[1]
        return True
    return False


def run_bash(block: Block, cwd: Path) -> None:
    for command in commands(block.body):
        if not_run(command) or set_up(command, cwd):
            continue
        words = in_folder(shlex.split(command), cwd)
        stdout = None
        if ">" in words:
            words, stdout = words[: words.index(">")], cwd / words[words.index(">") + 1]
        if words[0] == "netfl":
            words = smaller(words)
            if words[1] == "simulate" and "--checkpoint-every" in words:
                interrupted_with_a_checkpoint(words, cwd)
                continue
            if words[1] == "trace" and not (cwd / words[3]).exists():  # the trace the page says how to make
                script = ["benchmarks/make_fedscale_trace.py", words[3], "--clients", "50"]
                run_script(script, cwd)
            if words[1] == "report" and "--format" in words:
                assert netfl_command(words, cwd, stdout) == ""
                assert stdout.read_text().lstrip().startswith("{")
                continue
            netfl_command(words, cwd, stdout)
        elif words[0] == "python":
            assert stdout is None, command
            run_script(words[1:], cwd)
        elif words[0] == "sphinx-build":
            from sphinx.cmd.build import build_main

            with inside(cwd):
                status = build_main(words[1:])
            assert status == 0, f"{command} exited {status}"
        else:
            raise AssertionError(f"{block}: no rule runs {command!r}")


def run_script(argv: list[str], cwd: Path) -> None:
    """``python SCRIPT ARGS...``, in this process."""
    try:
        run_source((cwd / argv[0]).read_text(), str(cwd / argv[0]), cwd, argv)
    except SystemExit as stop:
        assert stop.code in (0, None), f"python {shlex.join(argv)} exited {stop.code}"
    except Exception:
        raise failed(f"python {shlex.join(argv)}") from None


def interrupted_with_a_checkpoint(words: list[str], cwd: Path) -> None:
    """A run with --checkpoint-every, stopped with Ctrl-C once it kept a checkpoint, so that the page's
    `netfl resume` has one to go on from (the page: "after a crash, a kill or Ctrl-C"). Its own process: the
    signal is the point."""
    words = [w if not re.fullmatch(r"\d+ ?rounds?", w) else "1rounds" for w in words]
    words = [*words[: -len(SMALL_RUN)], *RESUMABLE_RUN]
    out = Path(words[words.index("--out") + 1])
    checkpoint = cwd / out.parent / f".{out.name}.checkpoint"
    process = subprocess.Popen([str(BIN / "netfl"), *words[1:], "-q"], cwd=cwd, env=environment())
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130 and checkpoint.exists()


# ------------------------------------------------------------------------------------------------------- python


def run_python(block: Block, cwd: Path) -> None:
    """In this process: a user's file written and imported, or the block run as a script whose lines are the
    page's (a traceback names the page and the line)."""
    if block.mark and block.mark.startswith("file "):
        name = block.mark.split()[1]
        (cwd / name).write_text(block.body)
        import importlib

        try:
            with inside(cwd):
                importlib.import_module(Path(name).stem)
        except Exception:
            raise failed(f"import {Path(name).stem}") from None
        return
    try:
        with small_topologies():
            run_source("\n" * block.line + block.body, str(block.page), cwd, [str(block.page)])
    except Exception:
        raise failed("the block") from None


# --------------------------------------------------------------------------------------------------------- yaml


def run_yaml(block: Block, cwd: Path) -> None:
    data = yaml.safe_load(block.body)
    first = block.body.splitlines()[0]
    if first.startswith("# ") and first[2:].endswith(".yaml"):  # a file shown whole: the file it names
        shown = REPO / first[2:].strip()
        assert data == yaml.safe_load(shown.read_text()), f"{block} differs from {shown}"
        netfl_command(["netfl", "sweep", str(shown.relative_to(REPO)), "--dry-run"], cwd)
        return
    base = yaml.safe_load((REPO / "topologies" / "quickstart.yaml").read_text())
    group_keys = {"group", "count", "compute", "power", "battery", "availability", "usage", "link"}
    if "name" in data and "stop" in data:
        topology = data
    elif set(data) <= group_keys:
        topology = {**base, "devices": [{**base["devices"][0], **data}, *base["devices"][1:]]}
    else:
        topology = {**base, **data}
        if "task" in data:
            topology.pop("tasks", None)
    path = cwd / f"block_{block.line}.yaml"
    path.write_text(yaml.safe_dump(topology))
    idx = cwd / "idx"  # Fashion-MNIST's four files, where a topology names it and Debian's package is missing
    idx.mkdir(exist_ok=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"):
        (idx / name).touch()
    (idx / "t10k-labels-idx1-ubyte").touch()
    fashion = "fashion-mnist" in block.body and not Path("/usr/share/datasets/fashion-mnist").is_dir()
    netfl_command(["netfl", "validate", path.name, *(["--data-dir", "idx"] if fashion else [])], cwd)


# --------------------------------------------------------------------------------------------------------- pages


def own_files(cwd: Path) -> None:
    """The user's files that the "own model and data" page's blocks name (my_models.py:Net, my_data.py:load,
    mydata.npz) and the topology.yaml its Python block runs: small ones, as a reader would have."""
    (cwd / "my_models.py").write_text(
        "import torch.nn as nn\n\n\n"
        "class Net(nn.Sequential):\n"
        "    def __init__(self, width: int, num_classes: int, input_shape):\n"
        "        super().__init__(nn.Flatten(), nn.Linear(input_shape[-1], width), nn.ReLU(),"
        " nn.Linear(width, num_classes))\n"
    )
    (cwd / "my_data.py").write_text(
        "import numpy as np\n\n\n"
        "def load():\n"
        "    rng = np.random.default_rng(0)\n"
        "    x = rng.normal(size=(400, 8)).astype('float32')\n"
        "    return {'x': x, 'y': (x[:, 0] > 0).astype('int64'), 'client': np.arange(400) % 40}\n"
    )
    import numpy as np

    sys.path.insert(0, str(cwd))
    try:
        from my_data import load  # noqa: PLC0415
    finally:
        sys.path.remove(str(cwd))
        sys.modules.pop("my_data", None)
    np.savez(cwd / "mydata.npz", **load())
    topology = yaml.safe_load((REPO / "topologies" / "quickstart.yaml").read_text())
    (cwd / "topology.yaml").write_text(yaml.safe_dump({**topology, "stop": {"rounds": 1}}))


def own_algorithm_files(cwd: Path) -> None:
    """The topology.yaml that the "own algorithm" page's Python block runs (the page's own block writes my_fl.py)."""
    topology = yaml.safe_load((REPO / "topologies" / "quickstart.yaml").read_text())
    (cwd / "topology.yaml").write_text(yaml.safe_dump({**topology, "stop": {"rounds": 2}}))


PREPARE = {"docs/own-model.md": own_files, "docs/own-algorithm.md": own_algorithm_files}
RUN = {"bash": run_bash, "python": run_python, "yaml": run_yaml}


def page_id(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang in RUN for b in blocks(p))], ids=page_id)
def test_the_pages_blocks_run(page: Path, tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    PREPARE.get(page_id(page), lambda _: None)(cwd)
    for block in blocks(page):
        if block.lang in RUN:
            try:
                RUN[block.lang](block, cwd)
            except AssertionError as failure:
                raise AssertionError(f"{block}: {failure}") from None
            except Exception:
                raise AssertionError(f"{block}: {traceback.format_exc()}") from None
