"""The command line: one thin function per verb over the facade, and what the terminal shows."""
