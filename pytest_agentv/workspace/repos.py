"""Git in a workspace (AgentV v4 ``workspace/repo-manager.ts`` and ``file-changes.ts``): a
repository checked out at a commit, the baseline commit a workspace's changes are measured from,
those changes as a unified diff (``file_changes``), and the reset back to them.

Every git command is a bounded child process (``processes.run_process``: deadline, killed with
its descendants) with the allowlisted environment, prompts off: a clone that would ask for a
password fails at once instead of waiting for an answer nobody gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import NotGradedError
from ..paths import resolve_reference
from ..processes import run_process, scrubbed_env
from ..redaction import redact
from ..schema.workspace import RepoConfig

#: How long one git command may take (v4: five minutes).
GIT_TIMEOUT = 300.0
#: v4 reads ``org/name`` as a GitHub repository (an owner starts with a letter or digit: a
#: path such as ``./upstream`` or ``../x`` is local).
_SHORTHAND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/(?!\.+$)[A-Za-z0-9_.-]+$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/\s]+@[^/\s]+:")
_FILE_URL = re.compile(r"^file://", re.IGNORECASE)
#: No background upkeep (``git maintenance run --auto``, ``gc --auto``) started after a commit in a
#: folder that lives for one run.
_NO_UPKEEP = ("-c", "maintenance.auto=false", "-c", "gc.auto=0")
#: The baseline commit's author, unsigned whatever the user's git config says.
_IDENTITY = (
    *("-c", "user.email=agentv@localhost", "-c", "user.name=agentv"),
    *("-c", "commit.gpgsign=false"),
)


def git_env(passthrough: Iterable[str] = ()) -> dict[str, str]:
    """The allowlisted environment, with git told never to prompt."""
    env = scrubbed_env(passthrough)
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", GIT_SSH_COMMAND="ssh -o BatchMode=yes")
    return env


async def git(
    args: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    repository: Path | None = None,
    reaped: bool = True,
) -> str:
    """Run ``git args`` in ``cwd`` (with ``repository`` as its git directory, ``cwd`` its work
    tree, when given); its stdout, or ``NotGradedError`` saying what failed. In a repository
    cloned from elsewhere any command may reach the network (a promisor fetch, an LFS filter)
    and runs under the reaper; in the baseline repository, made here, git starts nothing that
    outlives it (``reaped=False``, a Python process fewer per command)."""
    outside = [f"--git-dir={repository}", f"--work-tree={cwd}"] if repository else []
    result = await run_process(
        ["git", *_NO_UPKEEP, *outside, *args],
        cwd=cwd,
        env=env,
        timeout=GIT_TIMEOUT,
        reaped=reaped,
    )
    failure = result.failure(f"git {args[0]}", GIT_TIMEOUT)
    if failure:
        raise NotGradedError(redact(failure))
    return result.stdout.decode("utf-8", errors="replace")


def clone_source(repo: str, folder: Path, rootdir: Path) -> str:
    """What ``git clone`` reads: a URL as written, ``org/name`` as GitHub's, else a local path
    found from ``folder`` inside the rootdir (the rule every path an eval names follows, a
    ``file://`` URL's path included)."""
    if _FILE_URL.match(repo):
        path = unquote(urlsplit(repo).path)
        return str(resolve_reference(path, start=folder, rootdir=rootdir, what="workspace repo"))
    if _URL.match(repo):
        return repo
    if _SHORTHAND.match(repo) and not (folder / repo).exists():
        return f"https://github.com/{repo}.git"
    return str(resolve_reference(repo, start=folder, rootdir=rootdir, what="workspace repo"))


async def checkout(
    repo: RepoConfig, workspace: Path, folder: Path, rootdir: Path, env: dict[str, str]
) -> str:
    """Clone ``repo`` into the workspace at its ``path`` and check out its commit (then walk
    ``ancestor`` commits back); the commit checked out."""
    source = clone_source(repo.repo, folder, rootdir)
    target = workspace / repo.path
    try:
        await git(["clone", "--quiet", "--no-checkout", "--", source, str(target)], workspace, env)
    except NotGradedError as exc:
        raise NotGradedError(f"workspace repo '{repo.repo}' could not be cloned: {exc}") from None
    if repo.sparse:
        await git(["sparse-checkout", "init", "--cone"], target, env)
        await git(["sparse-checkout", "set", "--", *repo.sparse], target, env)
    ref = repo.ref if repo.ancestor == 0 else f"{repo.ref}~{repo.ancestor}"
    for candidate in (ref, f"origin/{ref}"):
        try:
            sha = await git(
                ["rev-parse", "--verify", "--end-of-options", f"{candidate}^{{commit}}"],
                target,
                env,
            )
            break
        except NotGradedError:
            continue
    else:
        raise NotGradedError(f"workspace repo '{repo.repo}' has no commit '{ref}'")
    await git(["checkout", "--quiet", "--detach", sha.strip()], target, env)
    return sha.strip()


async def baseline(workspace: Path, env: dict[str, str], repository: Path | None = None) -> str:
    """Make the workspace a git repository and commit what is in it: the commit its changes
    are measured from (v4's ``initializeBaseline``). A folder that is not ours (a static path,
    perhaps inside the user's own repository) keeps its ``repository`` outside it, so that
    nothing is written to it, nor to the user's branch or index."""
    await git(["init", "--quiet"], workspace, env, repository, reaped=False)
    await git(["add", "-A"], workspace, env, repository, reaped=False)
    await git(
        [*_IDENTITY, "commit", "--quiet", "--no-verify", "--allow-empty", "-m", "agentv-baseline"],
        workspace,
        env,
        repository,
        reaped=False,
    )
    return (await git(["rev-parse", "HEAD"], workspace, env, repository, reaped=False)).strip()


async def changes(
    workspace: Path, since: str, env: dict[str, str], repository: Path | None = None
) -> str | None:
    """Everything changed in the workspace since ``since``, as a unified diff; files inside
    checked-out repositories are shown file by file (``--submodule=diff``). None when git
    cannot stage the changes (a repository the agent made without a commit): as in AgentV v4,
    the diff is best effort, and its absence does not stop the case. A diff over the output
    limit does: it is too large to give graders whole."""
    try:
        for child in sorted(workspace.iterdir()):
            if child.name != ".git" and (child / ".git").is_dir():
                await git(["add", "-A"], child, env)
        await git(["add", "-A"], workspace, env, repository, reaped=False)
    except NotGradedError:
        return None
    diff = ["diff", since, "--submodule=diff"]
    return (await git(diff, workspace, env, repository, reaped=False)).strip()


async def reset(
    workspace: Path,
    since: str,
    mode: str,
    checkouts: Sequence[tuple[RepoConfig, str]],
    env: dict[str, str],
    repository: Path | None = None,
) -> None:
    """Put the workspace back as it was at ``since`` (``fast``: untracked files go, ignored ones
    stay; ``strict``: those too), each checked-out repository at its commit. Repositories made
    since go too (``clean -ff``: git keeps them with one ``-f``)."""
    clean = ["clean", "-ffdx" if mode == "strict" else "-ffd", "--quiet"]
    for repo, sha in checkouts:
        target = workspace / repo.path
        await git(["reset", "--quiet", "--hard", sha], target, env)
        await git(clean, target, env)
    await git(["reset", "--quiet", "--hard", since], workspace, env, repository, reaped=False)
    await git(clean, workspace, env, repository, reaped=False)
