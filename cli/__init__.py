"""The tensorctl command line: thin click commands over refimpl and conformance."""
