"""README.md and docs/*.md stay true: every shell command in them runs (on the CPU fixtures, in a scratch
folder with a results store of its own) and exits as the page says; a command that cannot run here is
marked in the page and skipped with that reason (tests/docs_commands.py says how). Their links and the
repository paths they name exist, and the README stays short."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.docs_commands import ROOT, Command, environment, pages, parse, run_page, workdir
from tests.store_backends import PG_ENV, fresh_location

PAGES = {p.relative_to(ROOT).as_posix(): parse(p.read_text(), p.relative_to(ROOT).as_posix()) for p in pages()}
COMMANDS = [c for page in PAGES.values() for c in page.commands]
GPU = torch.cuda.is_available()


@pytest.fixture(scope="session")
def page_outcomes(request, tmp_path_factory):
    """page -> its commands' outcomes. Each page runs once, in order, in its own scratch folder; the pages
    of the selected tests run two at a time (CI has 2 cores, and a command mostly waits for a worker)."""
    done: dict = {}

    def run(name: str) -> dict:
        tmp = tmp_path_factory.mktemp("docs_" + re.sub(r"\W", "_", name))
        (tmp / "work").mkdir()
        pg = fresh_location("postgresql", tmp) if _has_postgres(PAGES[name]) else None
        outcomes = run_page(PAGES[name], workdir(tmp / "work"), environment(tmp / "store"), GPU, pg)
        return {o.command.ident: o for o in outcomes}

    def get(name: str) -> dict:
        if name not in done:
            selected = {
                item.callspec.params["cmd"].page
                for item in request.session.items
                if hasattr(item, "callspec") and isinstance(item.callspec.params.get("cmd"), Command)
            }
            todo = sorted((selected | {name}) - set(done))
            with ThreadPoolExecutor(max_workers=2) as pool:
                done.update(zip(todo, pool.map(run, todo)))
        return done[name]

    return get


def _has_postgres(page) -> bool:
    import os

    return bool(os.environ.get(PG_ENV)) and any("postgres" in c.needs for c in page.commands)


@pytest.mark.slow  # all pages together: about 100 s of CPU time, run two pages at a time
@pytest.mark.parametrize(
    "cmd", [pytest.param(c, id=c.ident, marks=[pytest.mark.gpu] if "gpu" in c.needs else []) for c in COMMANDS]
)
def test_documented_command_runs(page_outcomes, cmd: Command):
    outcome = page_outcomes(cmd.page)[cmd.ident]
    if outcome.skipped:
        pytest.skip(outcome.skipped)
    assert outcome.returncode == cmd.exit_code, (
        f"{cmd.ident}: `{cmd.text}` exited {outcome.returncode}, the page says {cmd.exit_code}\n{outcome.output}"
    )


def test_the_pages_have_commands_and_few_are_marked():
    runnable = [c for c in COMMANDS if not c.needs]
    assert len(runnable) >= 25, "the docs lost their commands (or the parser stopped finding them)"
    assert len(COMMANDS) - len(runnable) <= len(COMMANDS) // 4, "marks must stay rare: a reader trusts the commands"
    for name in ("README.md", "docs/submission.md", "docs/measurement.md", "docs/competition.md", "docs/results.md"):
        assert any(not c.needs for c in PAGES[name].commands), f"{name} has no command that runs here"


def test_readme_is_read_in_five_minutes():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/"


def test_security_policy_points_at_the_threat_model():
    policy = (ROOT / "SECURITY.md").read_text()
    assert "docs/security.md" in policy and len(policy.splitlines()) <= 30
    assert "## Threat model" in (ROOT / "docs" / "security.md").read_text()


LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"`((?:harness|tasks|fp4_reference|scripts|tests|results|submissions|docs)/[\w./*-]+)`")


def _targets(page: Path):
    text = page.read_text()
    for m in LINK.finditer(text):
        target = m.group(1).split("#", 1)[0]
        if target and not re.match(r"[a-z]+:", target):
            yield (page.parent / target).resolve(), target
    for m in PATH.finditer(text):
        yield ROOT / m.group(1).rstrip("."), m.group(1)


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_and_named_paths_exist(page: Path):
    missing = []
    for path, written in _targets(page):
        if "*" in written:
            found = any(ROOT.glob(str(path.relative_to(ROOT))))
        else:
            found = path.exists()
        if not found:
            missing.append(written)
    assert not missing, f"{page.relative_to(ROOT)} names what does not exist: {missing}"


def _sections(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lowercased, punctuation but '-' and '_' dropped,
    spaces as '-' (code blocks' comment lines are not headings)."""
    anchors, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def _broken_section_links(page: Path) -> list[str]:
    """The page's links to a section (``page.md#anchor``, ``#anchor``) of a markdown page that has no
    such heading (the page itself must exist: test_links_and_named_paths_exist checks that)."""
    broken = []
    for m in LINK.finditer(page.read_text()):
        path, _, section = m.group(1).partition("#")
        if not section or re.match(r"[a-z]+:", path):
            continue
        target = (page.parent / path).resolve() if path else page
        if target.suffix == ".md" and target.exists() and section not in _sections(target):
            broken.append(m.group(1))
    return broken


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_to_a_section_name_a_heading_of_that_page(page: Path):
    broken = _broken_section_links(page)
    assert not broken, f"{page.relative_to(ROOT)} links to sections that do not exist: {broken}"


def test_a_link_to_a_missing_section_is_found(tmp_path):
    """The check can fail: a link to a heading that is not there is reported, one that is there is not."""
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## How long a job takes\n\n```bash\n# not a heading\n```\n")
    assert _sections(page) == {"title", "how-long-a-job-takes"}
    linking = tmp_path / "linking.md"
    linking.write_text(
        "# Links\n\n[x](page.md#how-long-a-job-takes) [y](page.md#not-a-heading) [z](#links) [w](#title)\n"
    )
    assert _broken_section_links(linking) == ["page.md#not-a-heading", "#title"]  # '#title' is on page.md


def test_the_runner_reports_a_failing_command(tmp_path):
    """The check can fail: a wrong exit code is reported, markers are honoured, file blocks are written."""
    text = "\n".join(
        [
            "```python file=hello.py",
            "print('hello')",
            "```",
            "```bash",
            "python hello.py | grep -q hello",
            "false",
            "exit 3   # exit: 3",
            "nvidia-smi   # needs: gpu,ray",
            "bash scripts/setup.sh   # needs: setup",
            "echo a \\",
            "  b",
            "```",
            "```console",
            "$ true",
            "output, not a command",
            "```",
        ]
    )
    page = parse(text, "synthetic.md")
    assert [c.text for c in page.commands] == [
        "python hello.py | grep -q hello",
        "false",
        "exit 3",
        "nvidia-smi",
        "bash scripts/setup.sh",
        "echo a b",
        "true",
    ]
    (tmp_path / "w").mkdir()
    outcomes = run_page(page, tmp_path / "w", environment(tmp_path / "store"), gpu=False)
    codes = [(o.command.text, o.returncode, o.command.exit_code, bool(o.skipped)) for o in outcomes]
    assert codes == [
        ("python hello.py | grep -q hello", 0, 0, False),
        ("false", 1, 0, False),
        ("exit 3", 3, 3, False),
        ("nvidia-smi", None, 0, True),
        ("bash scripts/setup.sh", None, 0, True),
        ("echo a b", 0, 0, False),
        ("true", 0, 0, False),
    ]


def test_the_parser_refuses_unknown_marks():
    with pytest.raises(ValueError, match="unknown '# needs: tpu'"):
        parse("```bash\nls  # needs: tpu\n```\n", "x.md")
