import sys

sys.path.insert(0, "/app")
from fizzbuzz import fizzbuzz  # noqa: E402

expected = {1: "1", 3: "Fizz", 5: "Buzz", 9: "Fizz", 10: "Buzz", 15: "FizzBuzz", 30: "FizzBuzz", 7: "7"}
failures = [(n, fizzbuzz(n), want) for n, want in expected.items() if fizzbuzz(n) != want]
for n, got, want in failures:
    print(f"fizzbuzz({n}) = {got!r}, want {want!r}")
sys.exit(1 if failures else 0)
