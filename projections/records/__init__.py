"""Records people rely on: report revisions, sign-offs, access log, users, staff; imports models, store, display."""
