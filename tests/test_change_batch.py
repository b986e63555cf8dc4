"""A batch of workspace changes: each path once with its net effect, crowded folders folded."""

from __future__ import annotations

from modules.workspace.change_batch import ChangeBatch, fold


def taken(*changes: tuple[str, str] | tuple[str, str, str]) -> list[tuple[str, ...]]:
    batch = ChangeBatch()
    for kind, path, *dest in changes:
        batch.add(kind, path, False, dest[0] if dest else None)
    listed, refresh = batch.take()
    assert refresh == []
    return [
        (c["event"], c["path"], *([c["dest_path"]] if "dest_path" in c else [])) for c in listed
    ]


def test_a_written_file_is_created_once_and_a_passing_one_not_at_all() -> None:
    assert taken(("created", "a"), ("modified", "a"), ("modified", "a")) == [("created", "a")]
    assert taken(("created", "tmp"), ("modified", "tmp"), ("deleted", "tmp")) == []
    assert taken(("modified", "a"), ("deleted", "a")) == [("deleted", "a")]
    # It was there before the batch, and is again: the last change stands.
    assert taken(("deleted", "a"), ("created", "a"), ("deleted", "a")) == [("deleted", "a")]
    assert taken(("deleted", "a"), ("created", "a")) == [("created", "a")]


def test_the_order_is_that_of_each_paths_last_change_and_moves_stay_in_place() -> None:
    assert taken(("created", "a"), ("created", "b"), ("modified", "a")) == [
        ("created", "b"),
        ("created", "a"),
    ]
    assert taken(("created", "a"), ("moved", "a", "b"), ("created", "a"), ("modified", "b")) == [
        ("created", "a"),
        ("moved", "a", "b"),
        ("created", "a"),
        ("modified", "b"),
    ]


def test_a_batch_starts_empty_after_it_is_taken() -> None:
    batch = ChangeBatch()
    batch.add("created", "a", False)
    batch.take()
    batch.add("modified", "a", False)
    assert batch.take() == ([{"event": "modified", "path": "a", "is_dir": False}], [])


def changes_in(folder: str, count: int) -> list[dict[str, object]]:
    return [{"event": "created", "path": f"{folder}/f{n}", "is_dir": False} for n in range(count)]


def test_a_crowded_folder_is_folded_and_a_quiet_one_listed() -> None:
    quiet = changes_in("src", 3)
    listed, refresh = fold(changes_in("churn/d1", 51) + quiet + changes_in("churn/d2", 40), 50)
    assert refresh == [{"path": "churn/d1", "count": 51}]
    assert listed == quiet + changes_in("churn/d2", 40)


def test_folded_subfolders_count_as_one_and_fold_their_parent_in_turn() -> None:
    many = [change for n in range(60) for change in changes_in(f"churn/d{n:02d}", 60)]
    dirs = [{"event": "created", "path": f"churn/d{n:02d}", "is_dir": True} for n in range(60)]
    listed, refresh = fold(dirs + many + changes_in("src", 2), 50)
    assert refresh == [{"path": "churn", "count": 60 + 60 * 60}]
    assert listed == changes_in("src", 2)


def test_past_the_limit_at_the_top_the_whole_workspace_is_refreshed() -> None:
    scattered = [{"event": "deleted", "path": f"top{n}", "is_dir": False} for n in range(51)]
    assert fold(scattered, 50) == ([], [{"path": "", "count": 51}])


def test_a_move_is_folded_only_with_both_of_its_ends() -> None:
    out = {"event": "moved", "path": "churn/d1/x", "is_dir": False, "dest_path": "kept/x"}
    inside = {"event": "moved", "path": "churn/d1/y", "is_dir": False, "dest_path": "churn/d1/z"}
    listed, refresh = fold([*changes_in("churn/d1", 51), out, inside], 50)
    assert refresh == [{"path": "churn/d1", "count": 52}]
    assert listed == [out]
