"""The local cluster helper (nl2sql_indexer.cluster) before any PostgreSQL program runs: a
folder that is not empty is refused and left as it was. tests/db/test_cluster.py initialises
clusters."""

from __future__ import annotations

import pytest


def test_local_cluster_refuses_a_non_empty_folder_and_leaves_it_as_it_was(tmp_path):
    """A mistyped datadir (e.g. a data folder) must not be chowned, chmodded or initdb'ed."""
    from nl2sql_indexer.cluster import ClusterError, LocalCluster

    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    (folder / "questions.jsonl").write_text("{}\n")
    before = folder.stat()
    with pytest.raises(ClusterError, match="not empty"):
        LocalCluster(folder).init()
    after = folder.stat()
    assert (after.st_mode, after.st_uid, after.st_gid) == (
        before.st_mode,
        before.st_uid,
        before.st_gid,
    )
    assert sorted(p.name for p in folder.iterdir()) == ["questions.jsonl"]
