"""The library internals our code relies on, each with a check of the shape our code expects:
kit.py the record of one and the message a failed check gives, the others the checks by what
they reach. tests/test_transport_internals.py runs them."""
