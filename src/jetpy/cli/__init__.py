"""jetpy.cli"""
