"""Loops that run only while this node leads: the lifecycle, the trigger loop and its pure planner."""
