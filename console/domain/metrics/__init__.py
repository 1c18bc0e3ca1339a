"""console.domain.metrics"""
