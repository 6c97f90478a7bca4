# The two commands: `make run` (the whole service on SQLite) and `make test` (the suite).
# Both delegate to ./dev, which also works without make.
.PHONY: run test
run:
	./dev run
test:
	./dev test
