"""The seed zoo is big enough: the issue asks for 8 categories, 24 domains, 150 tools."""

from toolzoo.domains import seed_zoo


def test_zoo_size():
    zoo = seed_zoo()
    assert len({d.category for d in zoo.domains}) >= 8
    assert len(zoo.domains) >= 24
    assert len(zoo.tools) >= 150
