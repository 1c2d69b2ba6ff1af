"""Plain values <-> AttributeValues: numbers exact, and ``decimal`` only where one needs it."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal

import pytest

from dynalease._values import from_attribute, from_item, to_attribute, to_item


def test_numbers_are_stored_exactly_and_read_back_as_int_or_float() -> None:
    assert to_attribute(12) == {"N": "12"}
    assert to_attribute(10**40) == {"N": str(10**40)}
    assert to_attribute(0.1) == {"N": "0.1"}
    assert to_attribute(Decimal("2.50")) == {"N": "2.50"}
    assert to_attribute({3, 1.5}) in ({"NS": ["3", "1.5"]}, {"NS": ["1.5", "3"]})
    assert to_attribute(True) == {"BOOL": True}
    for text, value in [("12", 12), ("-0", 0), ("1E+2", 100), ("1.0", 1), ("2.5", 2.5)]:
        read = from_attribute({"N": text})
        assert (read, type(read)) == (value, type(value))
    assert from_attribute({"NS": ["1", "0.5"]}) == {1, 0.5}


@pytest.mark.parametrize("value", [float("inf"), float("nan"), Decimal("NaN"), {1, float("inf")}])
def test_a_number_dynamodb_cannot_store_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="finite number"):
        to_attribute(value)


@pytest.mark.parametrize("value", [1 + 2j, {1, "a"}])
def test_what_is_no_dynamodb_number_is_refused(value: object) -> None:
    with pytest.raises(TypeError):
        to_attribute(value)


def test_integers_go_both_ways_without_loading_decimal() -> None:
    code = (
        "import sys\n"
        "from dynalease._values import from_item, to_item\n"
        "item = to_item({'n': 7, 'list': [1, {'m': -2}], 'set': {3, 4}, 'b': False})\n"
        "assert from_item(item) == {'n': 7, 'list': [1, {'m': -2}], 'set': {3, 4}, 'b': False}\n"
        "assert 'decimal' not in sys.modules\n"
        "from_item({'f': {'N': '0.5'}})\n"
        "assert 'decimal' in sys.modules  # the first number that needs it\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_item_round_trips() -> None:
    item = {"id": "a", "n": 3, "f": 0.25, "tags": {"x", "y"}, "raw": b"\x00", "none": None}
    assert from_item(to_item(item)) == item
