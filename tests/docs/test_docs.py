"""The documents a user reads first: no empty code block where a table or a command should be (the headline
benchmark table was once an empty box), links to files of the repository that exist, and a README whose "Two
commands" section holds exactly two commands.
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest

SOURCE = pathlib.Path(os.environ.get("SUPERPOINT_RT_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
DOCS = sorted([SOURCE / "README.md", *(SOURCE / "docs").glob("*.md")])


def fenced_blocks(text: str):
    """(line number, body) of every ``` fenced block."""
    blocks, body, start = [], None, 0
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            if body is None:
                body, start = [], i
            else:
                blocks.append((start, "\n".join(body)))
                body = None
        elif body is not None:
            body.append(line)
    assert body is None, f"a fenced block opened at line {start} is never closed"
    return blocks


def test_documents_exist():
    assert (SOURCE / "README.md").is_file() and len(DOCS) >= 2, f"no documents found under {SOURCE}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_empty_code_block(doc: pathlib.Path):
    blocks = fenced_blocks(doc.read_text())
    empty = [line for line, body in blocks if not body.strip()]
    assert not empty, f"{doc.name}: empty code block(s) opened at line(s) {empty}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_to_repository_files_exist(doc: pathlib.Path):
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        if not (doc.parent / target).exists():
            missing.append(target)
    assert not missing, f"{doc.name} links to files that do not exist: {missing}"


def test_readme_has_exactly_two_commands():
    text = (SOURCE / "README.md").read_text()
    section = re.search(r"^## Two commands\n(.*?)^## ", text, re.S | re.M)
    assert section, "README.md has no '## Two commands' section"
    blocks = fenced_blocks(section.group(1))
    assert len(blocks) == 1, f"the 'Two commands' section has {len(blocks)} code blocks, expected one"
    commands = [l for l in blocks[0][1].splitlines() if l.strip() and not l.strip().startswith("#")]
    assert commands == [c for c in commands if c.startswith("bash scripts/")] and len(commands) == 2, commands
    assert commands[0].startswith("bash scripts/run.sh") and commands[1].startswith("bash scripts/test.sh"), commands


def test_parameters_doc_is_generated_from_the_table():
    """docs/PARAMETERS.md is `superpoint-rt params --markdown` (the C++ parameter table): regenerate it when the table
    changes."""
    import subprocess

    cli = os.environ.get("SUPERPOINT_RT_CLI")
    assert cli, "SUPERPOINT_RT_CLI is not set (ctest sets it)"
    want = subprocess.run([cli, "params", "--markdown"], check=True, capture_output=True, text=True).stdout
    have = (SOURCE / "docs" / "PARAMETERS.md").read_text()
    assert have == want, "docs/PARAMETERS.md is stale: run `superpoint-rt params --markdown > docs/PARAMETERS.md`"


def test_benchmark_tables_are_generated_from_the_runs():
    """docs/BENCHMARKS.md's current tables are bench/tables.py's rendering of docs/bench/*.json (one table per kind of
    CPU, the newest run of each): a run added without `--update`, or a table edited by hand, fails here."""
    import subprocess
    import sys

    runs = sorted((SOURCE / "docs" / "bench").glob("*.json"))
    assert runs, "docs/bench/ holds no bench JSON: the current tables have nothing to come from"
    done = subprocess.run([sys.executable, str(SOURCE / "bench" / "tables.py"), "--check",
                           str(SOURCE / "docs" / "BENCHMARKS.md"), *map(str, runs)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
