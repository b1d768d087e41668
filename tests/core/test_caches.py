from fleet_tui.core import caches


def test_memo_computes_once_per_key_and_clear_empties_every_cache():
    calls = []
    a, b = caches.memo("test-a", maxsize=2), caches.memo("test-b")
    assert caches.memo("test-a") is a
    for key in (1, 1, 2):
        a.get_or_compute(key, lambda key=key: calls.append(key) or key * 10)
    b.get_or_compute("x", lambda: 1)
    assert calls == [1, 2] and len(a) == 2 and len(b) == 1
    a.get_or_compute(3, lambda: 30)  # evicts the oldest key (1)
    assert a.get_or_compute(1, lambda: "again") == "again"
    caches.clear()
    assert len(a) == 0 and len(b) == 0
