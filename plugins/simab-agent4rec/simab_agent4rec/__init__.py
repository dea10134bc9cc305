"""Agent4Rec's recommenders as simab arms (entry points of group "simab.arms")."""
