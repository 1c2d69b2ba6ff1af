"""The Lambda recovery extension: deletes the rows a timed-out or crashed runtime held."""
