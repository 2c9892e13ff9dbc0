"""The node order key torchpod hands torch's c10d rendezvous: its grammar, and the plan's
ranks that follow from it (resolve.decide_ranks) for every backend."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod.options import read_user_options
from torchpod.order import MAX_DOMAIN_LEVELS, ORDER_KEY, domain_order, order_text, parse_order
from torchpod.resolve import decide_ranks
from torchpod.torchrun_flags import split_command_line
from torchpod.values import NodeCount


@pytest.mark.parametrize("text, order", [("0", (0,)), ("10", (10,)), ("2.10", (2, 10)),
                                         ("1.2.3.4.5.6.7.999999999", (1, 2, 3, 4, 5, 6, 7, 999999999))])
def test_an_order_is_whole_numbers_joined_by_dots(text, order):
    assert parse_order("k", text) == order
    assert order_text(order) == text


@pytest.mark.parametrize("text", ["", "-1", "01", "1.", ".1", "1..2", "1e3", "1,2", " 1", "1000000000",
                                  "1.2.3.4.5.6.7.8.9", "١", "1\n", "0x1", "+1"])
def test_anything_else_is_one_line_naming_the_source(text):
    with pytest.raises(InputError) as err:
        parse_order("--rdzv-conf torchpod_order", text)
    message = str(err.value)
    assert message.startswith("--rdzv-conf torchpod_order=") and "\n" not in message
    assert "expected whole numbers joined by '.'" in message


@given(st.text(max_size=60))
def test_any_text_parses_to_what_it_says_or_is_refused_in_one_line(text):
    try:
        order = parse_order("k", text)
    except InputError as err:
        assert "\n" not in str(err) and len(str(err)) < 300
    else:
        assert order_text(order) == text and all(0 <= part < 10**9 for part in order)


def _user(*argv: str):
    return read_user_options({}, split_command_line([*argv, "train.py"]))


def test_a_fixed_job_with_a_known_index_ranks_by_it():
    step = decide_ranks(_user(), "c10d", NodeCount.exactly(12), 10)
    assert (step.value.order, step.value.group_rank) == ((10,), 10)
    assert "node index" in step.value.how


def test_an_elastic_job_orders_by_index_but_promises_no_rank():
    step = decide_ranks(_user(), "c10d", NodeCount(2, 4), 3)
    assert (step.value.order, step.value.group_rank) == ((3,), None)
    assert "each round" in step.value.how


def test_without_an_index_torch_sorts_addresses_and_the_plan_says_so():
    step = decide_ranks(_user(), "c10d", NodeCount.exactly(2), None)
    assert (step.value.order, step.value.group_rank) == (None, None)
    assert any("addresses sorted as text" in note for note in step.notes)


@pytest.mark.parametrize("backend, rank", [("static", 4), ("etcd", None)])
def test_other_backends_carry_no_order(backend, rank):
    step = decide_ranks(_user(), backend, NodeCount.exactly(8), 4)
    assert (step.value.order, step.value.group_rank) == (None, rank)


def test_the_users_own_order_is_checked_and_kept():
    step = decide_ranks(_user("--rdzv-conf", f"{ORDER_KEY}=1.5"), "c10d", NodeCount.exactly(8), 5)
    assert (step.value.order, step.value.group_rank) == ((1, 5), None)
    with pytest.raises(InputError, match=f"--rdzv-conf {ORDER_KEY}='x'"):
        decide_ranks(_user("--rdzv-conf", f"{ORDER_KEY}=x"), "c10d", NodeCount.exactly(8), 5)
    with pytest.raises(InputError, match="expected it only with --rdzv-backend c10d or etcd-v2"):
        decide_ranks(_user("--rdzv-conf", f"{ORDER_KEY}=1"), "static", NodeCount.exactly(8), 5)


def test_a_domain_path_is_one_number_per_level_then_the_index():
    key = domain_order(("top", "sw-zeta"), 2)
    assert len(key) == 3 and key[-1] == 2
    assert key[:2] == domain_order(("top", "sw-zeta"), 0)[:2]  # shared by the domain's nodes
    assert key[0] == domain_order(("top", "sw-alpha"), 1)[0] and key[1] != domain_order(("top", "sw-alpha"), 1)[1]
    assert parse_order("k", order_text(key)) == key  # a key torchpod.torchrun takes back
    deep = tuple(f"l{i}" for i in range(12))
    assert len(domain_order(deep, 5)) == MAX_DOMAIN_LEVELS + 1  # the innermost levels only
    assert domain_order((), 7) == (7,)


@given(st.lists(st.sampled_from(["leaf-a", "leaf-b", "rack 3", "ü", "x" * 200]), min_size=1, max_size=40),
       st.sampled_from(["top", "block-1"]))
def test_sorting_by_the_key_keeps_every_domain_contiguous_and_index_ordered_inside(leaves, top):
    keys = sorted((domain_order((top, leaf), i), leaf, i) for i, leaf in enumerate(leaves))
    seen: list[str] = []
    for _, leaf, _ in keys:
        if not seen or seen[-1] != leaf:
            assert leaf not in seen, keys  # a domain's nodes never split
            seen.append(leaf)
    for leaf in set(leaves):
        inside = [i for _, name, i in keys if name == leaf]
        assert inside == sorted(inside)
