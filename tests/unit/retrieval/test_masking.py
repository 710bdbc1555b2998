"""Masked questions (DAIL-SQL §3.2): schema names and cell values replaced by <mask>."""

from __future__ import annotations

from nl2sql.retrieval.masking import MASK, inflections, mask_question, name_words


def test_name_words_split_snake_and_camel_case():
    assert name_words("songReleaseYear") == ["song", "release", "year"]
    assert name_words("singer_in_concert") == ["singer", "in", "concert"]


def test_inflections_cover_plural_forms():
    assert {"city", "cities"} <= inflections("city")
    assert {"singer", "singers"} <= inflections("singers")
    assert {"class", "classes"} <= inflections("class")


def test_masking_replaces_table_column_names_plurals_and_values():
    q = "How many singers from France released a song in 2014?"
    m = mask_question(q, names=["singer", "country", "song_release_year"], values=["France"])
    assert "singers" not in m and "France" not in m and "2014" not in m and "song" not in m
    assert m.startswith("How many <mask>")
    # adjacent masked words collapse into one mask
    assert f"{MASK} {MASK}" not in m


def test_masking_keeps_question_structure_words():
    m = mask_question(
        "What is the average capacity of all stadiums?", names=["stadium", "capacity"]
    )
    assert m == "What is the average <mask> of all <mask> ?"


def test_masking_multiword_values_and_quotes():
    m = mask_question(
        "Which concerts have the theme 'Summer Nights'?",
        names=["concert", "theme"],
        values=["Summer Nights"],
    )
    assert "Summer" not in m and "Nights" not in m
