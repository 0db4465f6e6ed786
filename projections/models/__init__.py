"""Read models the console, API and reports share: incidents, reviews, device state; imports store, display, schemas."""
