"""jetpy.server"""
