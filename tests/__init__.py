"""The test suite (`make test`). Tests needing ../shared/data skip with a reason when absent."""
