"""Spark replay validation (`keyshared validate-replay`): judge a trace with Spark jobs (entry: `validator`)."""
