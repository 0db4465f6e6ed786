"""How pages and files show things to people: times, cards, spreadsheet-safe cells; imports no project package."""
