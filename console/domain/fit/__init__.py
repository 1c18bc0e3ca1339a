"""console.domain.fit.predict"""
