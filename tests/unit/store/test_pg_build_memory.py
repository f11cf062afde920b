"""The HNSW build asks PostgreSQL for the memory its graph needs (hybrid.store.pg.store)."""

from hybrid.store.pg.vector import BUILD_MEMORY_MAX_MB, build_memory_mb, megabytes


def test_memory_grows_with_the_vectors_and_their_dimension():
    small, large = build_memory_mb(50_000, 384), build_memory_mb(1_000_000, 384)
    assert 64 < small < large
    assert build_memory_mb(1_000_000, 768) > large
    # 1M vectors of 384 dimensions: their floats alone are 1.4 GiB; the graph needs more
    assert 1536 < large < 4096


def test_memory_has_a_floor_and_a_ceiling():
    assert build_memory_mb(10, 384) == 64
    assert build_memory_mb(50_000_000, 1536) == BUILD_MEMORY_MAX_MB


def test_postgres_memory_settings_read_inmegabytes():
    assert megabytes("64MB") == 64
    assert megabytes("1GB") == 1024
    assert megabytes("8192kB") == 8
    assert megabytes("2TB") == 2 * 1024 * 1024
    assert megabytes("65536") == 64  # a bare number is in kB
