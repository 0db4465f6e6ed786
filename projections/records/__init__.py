"""Records people rely on: sign-offs, the access log, users, roles and API tokens, the staff roster, the property."""
