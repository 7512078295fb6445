"""The garbage collector is paused while the engine starts and is the process's own again
afterwards: on, off or with objects frozen, as the process had it."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import run_python
from talaria.collector import collector_paused, paused_the_first_time
from talaria.testing import ScriptedProvider, text


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_it_is_off_inside_and_on_again_after() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_process_that_turned_it_off_keeps_it_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_what_start_up_built_is_left_to_the_oldest_generation() -> None:
    gc.collect()
    with collector_paused():
        built = [[i] for i in range(5_000)]
    assert gc.get_count()[0] < 700  # no young generation left to scan at the next collection
    assert gc.get_freeze_count() == 0  # nothing stays frozen
    assert any(obj is built[0] for obj in gc.get_objects(generation=2))


def test_cyclic_garbage_of_the_stretch_is_still_collected() -> None:
    class Node:
        pass

    with collector_paused():
        node = Node()
        node.me = node  # type: ignore[attr-defined]
        del node
    assert gc.collect() >= 1


def test_objects_the_process_froze_stay_frozen() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    with collector_paused():
        _ = [[] for _ in range(100)]
    assert gc.get_freeze_count() == frozen
    assert gc.isenabled()


def test_it_resumes_when_the_last_of_several_threads_is_done_also_after_an_error() -> None:
    gc.enable()
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    assert inside.wait(10)
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("a stretch that fails")
    assert not gc.isenabled()  # the other thread still holds it
    release.set()
    other.join(10)
    assert gc.isenabled()


def test_after_a_first_turn_the_collector_is_on_and_nothing_is_frozen(tmp_path: Path) -> None:
    probe = (
        "import gc, json, sys\n"
        "from talaria import Agent\n"
        "agent = Agent(model='scripted-model', base_url=sys.argv[1], api_key='k',\n"
        "              home=sys.argv[2], cwd=sys.argv[2])\n"
        "answer = agent.chat('hello')\n"
        "print(json.dumps([answer, gc.isenabled(), gc.get_freeze_count()]))\n"
    )
    with ScriptedProvider([text("hi")]) as server:
        printed = run_python(probe, server.openai_base_url, str(tmp_path), cwd=tmp_path)
    assert json.loads(printed) == ["hi", True, 0]


def test_a_stretch_run_again_leaves_the_collector_alone() -> None:
    gc.enable()
    with paused_the_first_time("a stretch of this test"):
        assert not gc.isenabled()
    with paused_the_first_time("a stretch of this test"):
        assert gc.isenabled()  # later turns' short-lived cycles go to the young collections
