"""One patch of the series: its subject, author and message, the trailers
in the message (Signed-off-by, Upstream-Status), and what makes it
upstream-shaped.

A patch is read either from its file in patches/ (a mail, as `git
format-patch` writes it) or from its commit in vllm-src: both give the same
`Patch`.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .gitrepo import GitRepo

# A vLLM PR title: one or more [Tag]s, then the summary.
SUBJECT = re.compile(r"^(\[[^\]]+\])+ \S")
# Yocto's vocabulary; the bracketed part is required where it says why or
# where.
UPSTREAM_STATUS = re.compile(
    r"^(Pending|Backport|Inactive-Upstream( \[.+\])?|"
    r"(Submitted|Accepted|Denied|Inappropriate) \[.+\])$")
STATUS_VOCABULARY = ("Pending, Submitted [url], Accepted [commit], Backport, "
                     "Denied [why], Inappropriate [why]")
# Longest file name we write: well under every file system's limit.
MAX_FILE_NAME = 200


def parse_trailers(subject: str, message: str) -> list[tuple[str, str]]:
    """The (key, value) trailers at the end of a commit message."""
    # interpret-trailers takes the first paragraph for the title: give it
    # the subject so that a one-paragraph message still has its trailers.
    text = f"{subject or 'x'}\n\n{message}"
    out = subprocess.run(["git", "interpret-trailers", "--parse"],
                         input=text,
                         text=True,
                         stdout=subprocess.PIPE,
                         check=True).stdout
    return [(key.strip(), value.strip())
            for key, value in (line.split(":", 1) for line in out.splitlines()
                               if ":" in line)]


def file_name(subject: str) -> str:
    """The patch file of a commit: its whole subject as `git format-patch`
    spells it (letters, digits, '.' and '_'; any run of other characters
    one '-'), without git's 52-character cut and without a number.

    >>> file_name("[KV offload][3/N] CPU<->GPU transfer handlers")
    'KV-offload-3-N-CPU-GPU-transfer-handlers.patch'
    >>> file_name("[Bugfix] Free the CPU tier... at shutdown.")
    'Bugfix-Free-the-CPU-tier.-at-shutdown.patch'
    """
    words = re.findall(r"[A-Za-z0-9._]+", subject)
    stem = re.sub(r"\.\.+", ".", "-".join(words)).strip(".-")
    return f"{stem[:MAX_FILE_NAME]}.patch"


@dataclass(frozen=True)
class Patch:
    subject: str
    author: str  # "Name <email>"
    message: str  # the commit message after the subject, trailers included
    trailers: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, subject: str, author: str, message: str) -> Patch:
        subject, message = subject.strip(), message.strip()
        return cls(subject, author, message,
                   tuple(parse_trailers(subject, message)))

    @classmethod
    def from_file(cls, path: Path) -> Patch:
        """The patch of a file in patches/ (`git mailinfo` reads it)."""
        with tempfile.TemporaryDirectory() as tmp:
            msg, diff = Path(tmp) / "msg", Path(tmp) / "patch"
            with open(path, "rb") as f:
                out = subprocess.run(
                    ["git", "mailinfo", "-k",
                     str(msg), str(diff)],
                    stdin=f,
                    stdout=subprocess.PIPE,
                    check=True).stdout.decode()
            message = msg.read_text()
        headers = dict(
            line.split(": ", 1) for line in out.splitlines() if ": " in line)
        author = f"{headers.get('Author', '')} <{headers.get('Email', '')}>"
        return cls.parse(headers.get("Subject", ""), author, message)

    @classmethod
    def from_commit(cls, repo: GitRepo, commit: str) -> Patch:
        subject, author, message = repo.git("log", "-1",
                                            "--format=%s%x00%an <%ae>%x00%b",
                                            commit).split("\0", 2)
        return cls.parse(subject, author, message)

    def trailer(self, key: str) -> list[str]:
        return [v for k, v in self.trailers if k == key]

    @property
    def body(self) -> str:
        """The message without its trailers: why the change is needed."""
        keys = {k for k, _ in self.trailers}
        return "\n".join(line for line in self.message.splitlines()
                         if line.split(":", 1)[0] not in keys).strip()

    @property
    def upstream_status(self) -> str:
        """The Upstream-Status trailer ('' without one)."""
        return next(iter(self.trailer("Upstream-Status")), "")

    @property
    def file_name(self) -> str:
        return file_name(self.subject)

    @property
    def summary(self) -> str:
        r"""The first sentence of the body, on one line.

        >>> Patch("[Core] A", "A <a@b>", "Speeds up e.g. NIXL. Measured\n"
        ...       "with make bench.\n\nSigned-off-by: A <a@b>",
        ...       (("Signed-off-by", "A <a@b>"),)).summary
        'Speeds up e.g. NIXL.'
        >>> Patch("[Core] A", "A <a@b>", "It adds two flags:\n\n- a\n- b",
        ...       ()).summary
        'It adds two flags.'
        """
        paragraph = " ".join(self.body.split("\n\n", 1)[0].split())
        # A sentence ends at . ! or ? before a capital (not at "e.g. the",
        # nor at an abbreviation before a name: "e.g. NIXL").
        end = re.search(
            r"(?<!e\.g)(?<!i\.e)(?<!etc)(?<!vs)[.!?](?=\s+[A-Z`(\[])",
            paragraph)
        sentence = paragraph[:end.end()] if end else paragraph
        # A paragraph that introduces a list ends with a colon.
        return sentence[:-1] + "." if sentence.endswith(":") else sentence

    def dco_problem(self) -> str | None:
        """vLLM's DCO check: a Signed-off-by: trailer naming the author
        exactly."""
        signoffs = self.trailer("Signed-off-by")
        if not signoffs:
            return "no Signed-off-by: trailer (DCO)"
        if self.author not in signoffs:
            return (f"no Signed-off-by: from the author {self.author} "
                    f"(signed off by {', '.join(signoffs)})")
        return None

    def problems(self) -> list[str]:
        r"""What keeps the patch from being upstream-shaped (empty: nothing).

        >>> Patch("[Core] A", "A <a@b>", "Why.\n\nSigned-off-by: A <a@b>\n"
        ...       "Upstream-Status: Submitted", (
        ...           ("Signed-off-by", "A <a@b>"),
        ...           ("Upstream-Status", "Submitted"))).problems()
        ["Upstream-Status 'Submitted' is not in the vocabulary"]
        """
        problems = []
        if not self.subject:
            problems.append("no subject")
        elif not SUBJECT.match(self.subject):
            problems.append(f"subject {self.subject!r} lacks a [Tag] prefix "
                            "like [Core] or [KV offload][1/N]")
        if not self.body:
            problems.append("no body saying why the change is needed")
        dco = self.dco_problem()
        if dco:
            problems.append(dco)
        statuses = self.trailer("Upstream-Status")
        if len(statuses) != 1:
            problems.append("needs exactly one Upstream-Status: trailer "
                            f"({STATUS_VOCABULARY})")
        elif not UPSTREAM_STATUS.match(statuses[0]):
            problems.append(
                f"Upstream-Status {statuses[0]!r} is not in the vocabulary")
        return problems
