"""A finding investigated: replay, its views, incident page, evidence, video; imports projections, streams."""
