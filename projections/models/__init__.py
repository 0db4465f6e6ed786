"""Read models the console, the API and the reports share: incidents, review status, device state, generations."""
