"""What runs only while this node leads: the lifecycle and its epoch clock, the trigger loop and its pure planner, the dispatcher, the reaper, alert delivery."""
